//! The example of docs/BINDINGS.md (built by `cargo test`, so it stays true).
use tfcore::{DType, Graph, Tensor};

fn main() -> tfcore::Result<()> {
    let g = Graph::new()?;
    let w = Tensor::randn(&[3, 1], DType::F32, 0, 0)?.requires_grad(true)?;
    let loss = g.mean(&g.matmul(&Tensor::ones(&[4, 3], DType::F32)?, &w)?, &[], false)?;
    g.backward(&loss)?;
    g.clear()?;
    println!("{:?}", w.grad()?.unwrap().to_vec::<f32>()?);
    Ok(())
}
