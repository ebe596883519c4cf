//! The index ops on the safe API: values against loops written here, the
//! gradient of repeated rows, and an out-of-range index as an Err.
use tfcore::{sys, Graph, Tensor};

#[test]
fn index_select_gather_scatter_add_and_gradients() {
    let g = Graph::new().unwrap();
    let xs: Vec<f64> = (0..6).map(|i| i as f64).collect();
    let x = Tensor::from_slice(&xs, &[2, 3]).unwrap().requires_grad(true).unwrap();
    let idx = Tensor::from_slice(&[2i64, 2, 0], &[3]).unwrap();
    let y = g.index_select(&x, 1, &idx).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.0, 2.0, 0.0, 5.0, 5.0, 3.0]);
    let l = g.sum(&y, &[], false).unwrap();
    g.backward(&l).unwrap();
    let gx = x.grad().unwrap().unwrap();
    assert_eq!(gx.to_vec::<f64>().unwrap(), vec![1.0, 0.0, 2.0, 1.0, 0.0, 2.0]);

    let gi = Tensor::from_slice(&[1i64, 0, 0, 0, 1, 1], &[2, 3]).unwrap();
    let got = g.gather(&x, 0, &gi).unwrap().to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..6).map(|p| xs[[1usize, 0, 0, 0, 1, 1][p] * 3 + p % 3]).collect();
    assert_eq!(got, want);

    let src = Tensor::from_slice(&[10.0f64, 20.0, 30.0, 40.0, 50.0, 60.0], &[2, 3]).unwrap();
    let s = g.scatter_add(&x, 0, &gi, &src).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(s, vec![40.0, 21.0, 32.0, 13.0, 54.0, 65.0]);
}

#[test]
fn out_of_range_is_an_error() {
    let g = Graph::new().unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let idx = Tensor::from_slice(&[2i64], &[1]).unwrap();
    let e = g.index_select(&x, 0, &idx).unwrap_err();
    assert_eq!(e.status, sys::TFC_ERR_INVALID_ARG, "{e}");
    assert!(e.message.contains("tfc_index_select") && e.message.contains("out of range"), "{e}");
    let v = Tensor::from_slice(&[9.0f32], &[1]).unwrap();
    let ok = Tensor::from_slice(&[1i64], &[1]).unwrap();
    let ng = Graph::new().unwrap();
    ng.index_put(&x, &ok, &v, false).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 9.0]);
}
