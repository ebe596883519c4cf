//! SiLU and SwiGLU through the safe API, on hand-derived values
//! (silu(1) = 1/(1 + e⁻¹), silu'(1) = σ(1)(1 + 1 − σ(1)), 20 digits from mpmath).
use tfcore::{kernels, Graph, Result, Tensor};

const SILU1: f64 = 0.731_058_578_630_004_879_25;
const DSILU1: f64 = 0.927_670_511_871_486_731_79;

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-15 * (1.0 + y.abs()))
}

#[test]
fn silu_and_swiglu_forward_backward() -> Result<()> {
    let g = Graph::new()?;
    let x = Tensor::from_slice(&[1.0f64, 0.0], &[2])?.requires_grad(true)?;
    let y = g.silu(&x)?;
    assert!(close(&y.to_vec::<f64>()?, &[SILU1, 0.0]));
    g.backward(&g.sum(&y, &[], false)?)?;
    assert!(close(&x.grad()?.unwrap().to_vec::<f64>()?, &[DSILU1, 0.5]));

    // gate_up [1, 4] = [gate | up] = [1, 0 | 2, 3]: out = [2 silu(1), 0]
    let gu = Tensor::from_slice(&[1.0f64, 0.0, 2.0, 3.0], &[1, 4])?.requires_grad(true)?;
    let out = g.swiglu_fused(&gu)?;
    assert!(close(&out.to_vec::<f64>()?, &[2.0 * SILU1, 0.0]));
    g.backward(&g.sum(&out, &[], false)?)?;
    // d gate = up · silu'(gate), d up = silu(gate)
    assert!(close(&gu.grad()?.unwrap().to_vec::<f64>()?, &[2.0 * DSILU1, 1.5, SILU1, 0.0]));

    let gate = Tensor::from_slice(&[1.0f64], &[1])?;
    let up = Tensor::from_slice(&[-2.0f64], &[1])?;
    assert!(close(&g.swiglu(&gate, &up)?.to_vec::<f64>()?, &[-2.0 * SILU1]));
    let o = Tensor::zeros(&[1], tfcore::DType::F64)?;
    kernels::swiglu_forward(&gate, &up, &o)?;
    assert!(close(&o.to_vec::<f64>()?, &[-2.0 * SILU1]));
    let dy = Tensor::from_slice(&[1.0f64], &[1])?;
    let dg = Tensor::zeros(&[1], tfcore::DType::F64)?;
    kernels::swiglu_backward(&dy, &gate, &up, Some(&dg), None, false)?;
    assert!(close(&dg.to_vec::<f64>()?, &[-2.0 * DSILU1]));
    // an odd last dim is refused
    assert!(g.swiglu_fused(&Tensor::from_slice(&[1.0f64, 2.0, 3.0], &[3])?).is_err());
    Ok(())
}
