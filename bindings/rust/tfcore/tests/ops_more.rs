//! The issue #16 ops through the safe API, on hand-derived values.
use tfcore::{Graph, Result, Tensor};

#[test]
fn pointwise_clamp_minmax_and_gradients() -> Result<()> {
    let g = Graph::new()?;
    let x = Tensor::from_slice(&[-1.5f64, 0.0, 0.5, 2.5], &[4])?.requires_grad(true)?;
    assert_eq!(g.abs(&x)?.to_vec::<f64>()?, vec![1.5, 0.0, 0.5, 2.5]);
    assert_eq!(g.round(&x)?.to_vec::<f64>()?, vec![-2.0, 0.0, 0.0, 2.0]);
    assert_eq!(g.sign(&x)?.to_vec::<f64>()?, vec![-1.0, 0.0, 1.0, 1.0]);
    let c = g.clamp(&x, 0.0, 1.0)?;
    assert_eq!(c.to_vec::<f64>()?, vec![0.0, 0.0, 0.5, 1.0]);
    let loss = g.sum(&c, &[], false)?;
    g.backward(&loss)?;
    assert_eq!(x.grad()?.unwrap().to_vec::<f64>()?, vec![0.0, 1.0, 1.0, 0.0]);
    let a = Tensor::from_slice(&[1.0f64, 2.0], &[2])?;
    let b = Tensor::from_slice(&[1.0f64, 3.0], &[2])?;
    assert_eq!(g.maximum(&a, &b)?.to_vec::<f64>()?, vec![1.0, 3.0]);
    assert_eq!(g.minimum(&a, &b)?.to_vec::<f64>()?, vec![1.0, 2.0]);
    Ok(())
}

#[test]
fn scans_masks_sorting_and_comparisons() -> Result<()> {
    let g = Graph::new()?;
    let x = Tensor::from_slice(&[3.0f64, 1.0, 2.0, 1.0], &[2, 2])?;
    assert_eq!(g.cumsum(&x, 1)?.to_vec::<f64>()?, vec![3.0, 4.0, 2.0, 3.0]);
    assert_eq!(g.triu(&x, 0)?.to_vec::<f64>()?, vec![3.0, 1.0, 0.0, 1.0]);
    assert_eq!(g.tril(&x, 0)?.to_vec::<f64>()?, vec![3.0, 0.0, 2.0, 1.0]);
    let (v, i) = g.sort(&x, 1, false)?;
    assert_eq!(v.to_vec::<f64>()?, vec![1.0, 3.0, 1.0, 2.0]);
    assert_eq!(i.to_vec::<i64>()?, vec![1, 0, 1, 0]);
    assert_eq!(x.argsort(0, true)?.to_vec::<i64>()?, vec![0, 0, 1, 1]);
    assert_eq!(x.gt_scalar(1.5)?.to_vec::<u8>()?, vec![1, 0, 1, 0]);
    assert_eq!(x.any(&[], false)?.to_vec::<u8>()?, vec![1]);
    let ids = Tensor::from_slice(&[2i64, 0], &[2])?;
    assert_eq!(ids.one_hot(3)?.to_vec::<i64>()?, vec![0, 0, 1, 1, 0, 0]);
    let p = Tensor::from_slice(&[0.0f64, 1.0, 0.0], &[3])?;
    assert_eq!(p.multinomial(4, true, 7, 0)?.to_vec::<i64>()?, vec![1, 1, 1, 1]);
    assert!(p.multinomial(2, false, 7, 0).is_err());
    Ok(())
}
