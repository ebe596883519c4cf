//! Explicit attention forward/backward (the fused kernels' public doors):
//! forward against naive loops, backward against f64 central differences
//! of the forward, and the graph op against the explicit pair.
use tfcore::{kernels, DType, Graph, Result, Tensor};

const B: usize = 1;
const H: usize = 2;
const T: usize = 4;
const D: usize = 3;

fn shape() -> [i64; 4] {
    [B as i64, H as i64, T as i64, D as i64]
}

/// Naive causal attention on flat [B,H,T,D] arrays.
fn naive(q: &[f64], k: &[f64], v: &[f64], scale: f64) -> Vec<f64> {
    let mut out = vec![0.0; q.len()];
    for bh in 0..B * H {
        let base = bh * T * D;
        for i in 0..T {
            let scores: Vec<f64> = (0..=i)
                .map(|j| (0..D).map(|d| q[base + i * D + d] * k[base + j * D + d]).sum::<f64>() * scale)
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = scores.iter().map(|s| (s - m).exp()).sum();
            for d in 0..D {
                out[base + i * D + d] = (0..=i).map(|j| (scores[j] - m).exp() / z * v[base + j * D + d]).sum();
            }
        }
    }
    out
}

fn forward(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<(Tensor, Tensor)> {
    let out = Tensor::zeros(&shape(), DType::F64)?;
    let lse = Tensor::zeros(&[B as i64, H as i64, T as i64], DType::F64)?;
    kernels::attention_forward(q, k, v, true, scale, &out, Some(&lse))?;
    Ok((out, lse))
}

#[test]
fn attention_forward_backward() -> Result<()> {
    let scale = 1.0 / (D as f64).sqrt();
    let q = Tensor::randn(&shape(), DType::F64, 1, 0)?;
    let k = Tensor::randn(&shape(), DType::F64, 1, 100)?;
    let v = Tensor::randn(&shape(), DType::F64, 1, 200)?;
    let w = Tensor::randn(&shape(), DType::F64, 1, 300)?; // objective: Σ out ⊙ w, so dout = w
    let (out, lse) = forward(&q, &k, &v, scale)?;
    let expect = naive(&q.to_vec()?, &k.to_vec()?, &v.to_vec()?, scale);
    for (a, b) in out.to_vec::<f64>()?.iter().zip(&expect) {
        assert!((a - b).abs() < 1e-12, "forward {a} vs naive {b}");
    }

    let grads: Vec<Tensor> = (0..3).map(|_| Tensor::zeros(&shape(), DType::F64)).collect::<Result<_>>()?;
    kernels::attention_backward(&w, &q, &k, &v, &out, &lse, true, scale, Some(&grads[0]), Some(&grads[1]), Some(&grads[2]), false)?;

    let wv = w.to_vec::<f64>()?;
    let objective = |q: &Tensor, k: &Tensor, v: &Tensor| -> Result<f64> {
        let (o, _) = forward(q, k, v, scale)?;
        Ok(o.to_vec::<f64>()?.iter().zip(&wv).map(|(a, b)| a * b).sum())
    };
    let eps = 1e-6;
    let mut worst: f64 = 0.0;
    for (which, grad) in grads.iter().enumerate() {
        let analytic = grad.to_vec::<f64>()?;
        let inputs = [&q, &k, &v];
        let base = inputs[which].to_vec::<f64>()?;
        for i in 0..base.len() {
            let at = |d: f64| -> Result<f64> {
                let mut p = base.clone();
                p[i] += d;
                let moved = Tensor::from_slice(&p, &shape())?;
                let mut args = [q.clone(), k.clone(), v.clone()];
                args[which] = moved;
                objective(&args[0], &args[1], &args[2])
            };
            let numeric = (at(eps)? - at(-eps)?) / (2.0 * eps);
            let a = analytic[i];
            worst = worst.max((a - numeric).abs() / (a.abs() + numeric.abs() + 1e-8));
        }
    }
    assert!(worst < 1e-6, "attention backward vs finite differences: worst rel err {worst:e}");

    // accumulate adds on top: a second call doubles dq
    let dq1 = grads[0].to_vec::<f64>()?;
    kernels::attention_backward(&w, &q, &k, &v, &out, &lse, true, scale, Some(&grads[0]), None, None, true)?;
    for (a, b) in grads[0].to_vec::<f64>()?.iter().zip(&dq1) {
        assert!((a - 2.0 * b).abs() < 1e-12);
    }

    // the graph op is the same computation, and its backward gives the same dq
    let g = Graph::new()?;
    let qg = q.deep_clone()?.requires_grad(true)?;
    let og = g.attention(&qg, &k, &v, true, scale)?;
    for (a, b) in og.to_vec::<f64>()?.iter().zip(&expect) {
        assert!((a - b).abs() < 1e-12);
    }
    let loss = g.sum(&g.mul(&og, &w)?, &[], false)?;
    g.backward(&loss)?;
    for (a, b) in qg.grad()?.unwrap().to_vec::<f64>()?.iter().zip(&dq1) {
        assert!((a - b).abs() < 1e-12, "graph dq {a} vs explicit {b}");
    }
    Ok(())
}

#[test]
fn attention_bad_shapes_are_errors() -> Result<()> {
    let q = Tensor::zeros(&shape(), DType::F64)?;
    let k = Tensor::zeros(&[1, 2, 4, 5], DType::F64)?;
    let out = Tensor::zeros(&shape(), DType::F64)?;
    let e = kernels::attention_forward(&q, &k, &k, true, 1.0, &out, None).unwrap_err();
    assert!(e.message.contains("tfc_attention_forward"), "{e}");
    Ok(())
}
