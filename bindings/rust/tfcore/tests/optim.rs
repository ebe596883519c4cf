//! AdamW through the safe wrapper: trajectory against the formulas, and a
//! tiny MLP whose loss falls.
use tfcore::{DType, Graph, OptimKind, Optimizer, Options, Result, Tensor};

#[test]
fn adamw_matches_the_formulas() -> Result<()> {
    let (lr, b1, b2, eps, wd) = (0.05, 0.9, 0.99, 1e-8, 0.1);
    let p0 = [0.5, -1.0, 2.0];
    let target = [1.0, 0.0, -1.0];
    let p = Tensor::from_slice(&p0, &[3])?.requires_grad(true)?;
    let t = Tensor::from_slice(&target, &[3])?;
    let mut opt = Optimizer::new(OptimKind::AdamW, &[&p], &Options::new(OptimKind::AdamW).lr(lr).betas(b1, b2).eps(eps).weight_decay(wd))?;
    let g = Graph::new()?;
    let (mut r, mut m, mut v) = (p0, [0.0; 3], [0.0; 3]);
    for step in 1..=25 {
        let d = g.sub(&p, &t)?;
        g.backward(&g.sum(&g.mul(&d, &d)?, &[], false)?)?;
        g.clear()?;
        opt.step()?;
        opt.zero_grad(true)?;
        for i in 0..3 {
            let grad = 2.0 * (r[i] - target[i]);
            r[i] -= lr * wd * r[i];
            m[i] = b1 * m[i] + (1.0 - b1) * grad;
            v[i] = b2 * v[i] + (1.0 - b2) * grad * grad;
            let (mh, vh) = (m[i] / (1.0 - f64::powi(b1, step)), v[i] / (1.0 - f64::powi(b2, step)));
            r[i] -= lr * mh / (vh.sqrt() + eps);
        }
    }
    for (a, b) in p.to_vec::<f64>()?.iter().zip(&r) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    assert_eq!(opt.step_count()?, 25);
    assert!(Optimizer::new(OptimKind::AdamW, &[&p], &Options::new(OptimKind::AdamW).lr(-1.0)).is_err());
    Ok(())
}

#[test]
fn adamw_trains_an_mlp() -> Result<()> {
    let n = 64i64;
    let xs: Vec<f32> = (0..n).map(|i| -3.0 + 6.0 * i as f32 / (n - 1) as f32).collect();
    let ys: Vec<f32> = xs.iter().map(|x| x.sin()).collect();
    let x = Tensor::from_slice(&xs, &[n, 1])?;
    let y = Tensor::from_slice(&ys, &[n, 1])?;
    let g = Graph::new()?;
    let w1 = Tensor::randn(&[1, 16], DType::F32, 7, 0)?.requires_grad(true)?;
    let b1 = Tensor::zeros(&[16], DType::F32)?.requires_grad(true)?;
    let w2 = Tensor::uniform(&[16, 1], DType::F32, -0.1, 0.1, 7, 100)?.requires_grad(true)?;
    let b2 = Tensor::zeros(&[1], DType::F32)?.requires_grad(true)?;
    let mut opt = Optimizer::new(OptimKind::AdamW, &[&w1, &b1, &w2, &b2], &Options::new(OptimKind::AdamW).lr(0.02).weight_decay(0.0))?;
    let (mut first, mut last) = (None, 0.0);
    for _ in 0..300 {
        let h = g.tanh(&g.add(&g.matmul(&x, &w1)?, &b1)?)?;
        let err = g.sub(&g.add(&g.matmul(&h, &w2)?, &b2)?, &y)?;
        let loss = g.mean(&g.mul(&err, &err)?, &[], false)?;
        g.backward(&loss)?;
        g.clear()?;
        opt.step()?;
        opt.zero_grad(true)?;
        last = loss.item()?;
        first.get_or_insert(last);
    }
    let first = first.unwrap();
    println!("AdamW MLP loss {first:.4} -> {last:.4}");
    assert!(last < 0.05 * first, "loss {first} -> {last}");
    Ok(())
}
