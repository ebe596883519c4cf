//! Failures come back as Err with the status and the library's message;
//! handles release in any order.
use tfcore::{sys, DType, Graph, Tensor};

#[test]
fn shape_mismatch_is_an_error_with_the_message() {
    let g = Graph::new().unwrap();
    let a = Tensor::zeros(&[4, 8], DType::F32).unwrap();
    let b = Tensor::zeros(&[7, 3], DType::F32).unwrap();
    let e = g.matmul(&a, &b).unwrap_err();
    assert_eq!(e.status, sys::TFC_ERR_SHAPE);
    assert_eq!(e.status_name(), "TFC_ERR_SHAPE");
    assert!(e.message.contains("tfc_matmul") && e.message.contains("[4,8]") && e.message.contains("[7,3]"), "{e}");
    assert!(e.to_string().ends_with("(TFC_ERR_SHAPE)"));
}

#[test]
fn bad_inputs() {
    let e = Tensor::zeros(&[-1, 2], DType::F32).unwrap_err();
    assert_eq!(e.status, sys::TFC_ERR_INVALID_ARG, "{e}");
    assert!(e.message.contains("tfc_tensor_zeros"), "{e}");
    let e = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]).unwrap_err();
    assert_eq!(e.status, sys::TFC_ERR_SHAPE, "{e}");
    let e = Tensor::zeros(&[3], DType::F32).unwrap().item().unwrap_err();
    assert!(e.message.contains("tfc_tensor_item"), "{e}");
    let g = Graph::new().unwrap();
    let f = Tensor::zeros(&[2], DType::F32).unwrap();
    let d = Tensor::zeros(&[2], DType::F64).unwrap();
    assert_eq!(g.add(&f, &d).unwrap_err().status, sys::TFC_ERR_DTYPE);
    // backward through a cleared graph fails and leaves gradients untouched
    let x = Tensor::ones(&[2], DType::F64).unwrap().requires_grad(true).unwrap();
    let loss = g.sum(&g.mul(&x, &x).unwrap(), &[], false).unwrap();
    g.clear().unwrap();
    let e = g.backward(&loss).unwrap_err();
    assert!(e.message.contains("tfc_graph_backward"), "{e}");
    assert!(x.grad().unwrap().is_none());
}

#[test]
fn release_order_never_matters() {
    let g = Graph::new().unwrap();
    let x = Tensor::arange(0.0, 6.0, 1.0, DType::F64).unwrap().requires_grad(true).unwrap();
    let v = g.reshape(&x, &[2, 3]).unwrap();
    let t = g.transpose(&v, 0, 1).unwrap();
    let s = g.sum(&t, &[], false).unwrap();
    drop(x);
    drop(g); // nodes stay alive while tensors use them
    drop(v);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    assert_eq!(s.item().unwrap(), 15.0);
    let alias = t.clone();
    drop(t);
    assert_eq!(alias.shape(), vec![3, 2]);
}

#[test]
fn devices() {
    let t = Tensor::arange(0.0, 4.0, 1.0, DType::F32).unwrap();
    assert_eq!(t.device(), (tfcore::Device::Cpu, 0));
    assert_eq!(t.to_device(tfcore::Device::Cpu, 0).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0]);
    if tfcore::cuda_available() {
        let g = t.to_device(tfcore::Device::Cuda, 0).unwrap();
        assert_eq!(g.device().0, tfcore::Device::Cuda);
        assert_eq!(g.to_device(tfcore::Device::Cpu, 0).unwrap().to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0]);
    } else {
        let e = t.to_device(tfcore::Device::Cuda, 0).unwrap_err();
        assert_eq!(e.status, sys::TFC_ERR_DEVICE, "{e}");
    }
}
