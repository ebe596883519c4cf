//! A tiny MLP learns y = sin(x) with SGD written here on the safe API; its
//! loss must fall. Gradients are checked against f64 central differences.
use tfcore::{DType, Graph, Result, Tensor};

fn data(n: usize) -> (Vec<f32>, Vec<f32>) {
    let xs: Vec<f32> = (0..n).map(|i| -3.0 + 6.0 * i as f32 / (n - 1) as f32).collect();
    let ys = xs.iter().map(|x| x.sin()).collect();
    (xs, ys)
}

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    fn new(hidden: i64, dtype: DType) -> Result<Mlp> {
        let g = Graph::new()?;
        let w2 = g.mul_scalar(&Tensor::randn(&[hidden, 1], dtype, 1234, 100)?, 0.1)?; // small: the fit starts near mean(sin²) ≈ 0.5
        Ok(Mlp {
            w1: Tensor::randn(&[1, hidden], dtype, 1234, 0)?.requires_grad(true)?,
            b1: Tensor::zeros(&[hidden], dtype)?.requires_grad(true)?,
            w2: w2.requires_grad(true)?,
            b2: Tensor::zeros(&[1], dtype)?.requires_grad(true)?,
        })
    }

    fn params(&self) -> [&Tensor; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    /// mean((tanh(x W1 + b1) W2 + b2 − y)²)
    fn loss(&self, g: &Graph, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        let h = g.tanh(&g.add(&g.matmul(x, &self.w1)?, &self.b1)?)?;
        let pred = g.add(&g.matmul(&h, &self.w2)?, &self.b2)?;
        let err = g.sub(&pred, y)?;
        g.mean(&g.mul(&err, &err)?, &[], false)
    }
}

#[test]
fn mlp_loss_falls() -> Result<()> {
    let n = 64;
    let (xs, ys) = data(n);
    let x = Tensor::from_slice(&xs, &[n as i64, 1])?;
    let y = Tensor::from_slice(&ys, &[n as i64, 1])?;
    let model = Mlp::new(16, DType::F32)?;
    let g = Graph::new()?;
    let update = Graph::new()?; // recording off: the SGD step is not differentiated
    update.set_grad_enabled(false)?;
    let (mut first, mut last) = (None, 0.0);
    for _ in 0..300 {
        let loss = model.loss(&g, &x, &y)?;
        g.backward(&loss)?;
        g.clear()?;
        last = loss.item()?;
        first.get_or_insert(last);
        for p in model.params() {
            let grad = p.grad()?.expect("every parameter gets a gradient");
            p.copy_from(&update.sub(p, &update.mul_scalar(&grad, 0.05)?)?)?;
            p.zero_grad(true)?;
        }
    }
    let first = first.unwrap();
    println!("loss {first:.4} -> {last:.4}");
    assert!(last.is_finite() && last < 0.1 * first, "loss {first} -> {last}");
    assert_eq!(update.num_nodes(), 0);
    Ok(())
}

#[test]
fn mlp_gradients_match_finite_differences() -> Result<()> {
    let n = 8;
    let (xs, ys) = data(n);
    let to64 = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let x = Tensor::from_slice(&to64(&xs), &[n as i64, 1])?;
    let y = Tensor::from_slice(&to64(&ys), &[n as i64, 1])?;
    let model = Mlp::new(5, DType::F64)?;
    // non-zero biases so their gradients are exercised at a generic point
    model.b1.copy_from(&Tensor::randn(&[5], DType::F64, 9, 0)?)?;
    let g = Graph::new()?;
    g.backward(&model.loss(&g, &x, &y)?)?;
    g.clear()?;
    let eval = Graph::new()?;
    eval.set_grad_enabled(false)?;
    let eps = 1e-6;
    let mut worst: f64 = 0.0;
    for p in model.params() {
        let analytic = p.grad()?.unwrap().to_vec::<f64>()?;
        let base = p.to_vec::<f64>()?;
        let shape = p.shape();
        for i in 0..base.len() {
            let at = |d: f64| -> Result<f64> {
                let mut v = base.clone();
                v[i] += d;
                p.copy_from(&Tensor::from_slice(&v, &shape)?)?;
                model.loss(&eval, &x, &y)?.item()
            };
            let numeric = (at(eps)? - at(-eps)?) / (2.0 * eps);
            let a = analytic[i];
            worst = worst.max((a - numeric).abs() / (a.abs() + numeric.abs() + 1e-8));
        }
        p.copy_from(&Tensor::from_slice(&base, &shape)?)?;
    }
    assert!(worst < 1e-6, "worst relative error {worst:e}");
    Ok(())
}
