//! GPT models through the safe wrapper: a Llama built from a GptConfig, forward
//! with loss (against a cross-entropy computed here from the logits), greedy
//! generate (against argmax over uncached forwards), a training step, and
//! tfcore::load_model on each kind of file: a checkpoint of Gpt::save, a Hugging
//! Face directory of Gpt::save_hf, an llm.c file of Gpt::save_llmc, a run
//! directory told from a Hugging Face one by checkpoint.json, and the errors.
use std::path::PathBuf;

use tfcore::{load_model, sys, Arch, DType, Gpt, GptConfig, Graph, OptimKind, Optimizer, Options, Result, Sampling, Tensor};

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("tfcore-rust-gpt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn llama(layers: i32, dtype: DType, seed: u64) -> Result<Gpt> {
    let mut cfg = GptConfig::preset("llama-tiny")?;
    cfg.vocab_size = 50;
    cfg.n_layer = layers;
    cfg.dtype = dtype;
    Gpt::new(&cfg, seed)
}

fn logits_of(m: &Gpt, idx: &Tensor) -> Result<Vec<f32>> {
    m.forward(idx, None)?.0.to_vec::<f32>()
}

#[test]
fn llama_forward_generate_and_train() -> Result<()> {
    let m = llama(2, DType::F32, 7)?;
    let cfg = m.config()?;
    assert_eq!((cfg.arch, cfg.n_kv_head, cfg.mlp_hidden, cfg.tie_weights), (Arch::Llama, 2, 352, false));
    assert_eq!(cfg.arch.name(), "llama");
    let (b, t, v) = (2usize, 6usize, 50usize);
    let idx_v: Vec<i64> = (1..=12).collect();
    let tg_v: Vec<i64> = (2..=13).collect();
    let idx = Tensor::from_slice(&idx_v, &[2, 6])?;
    let tg = Tensor::from_slice(&tg_v, &[2, 6])?;
    let (logits, loss) = m.forward(&idx, Some(&tg))?;
    assert_eq!(logits.shape(), vec![2, 6, 50]);
    let l = logits.to_vec::<f64>()?;
    let mut want = 0.0;
    for p in 0..b * t {
        let row = &l[p * v..(p + 1) * v];
        let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = mx + row.iter().map(|x| (x - mx).exp()).sum::<f64>().ln();
        want += lse - row[tg_v[p] as usize];
    }
    want /= (b * t) as f64;
    let got = loss.expect("targets give a loss").item()?;
    assert!((got - want).abs() < 1e-5, "loss {got} vs {want}");
    let (alone, none) = m.forward(&idx, None)?;
    assert!(none.is_none());
    assert_eq!(alone.to_vec::<f32>()?, logits.to_vec::<f32>()?);

    // greedy generation with the KV cache = argmax over full forwards
    let mut seq = vec![3i64, 1, 4];
    let mut want_tokens = Vec::new();
    for _ in 0..5 {
        let x = Tensor::from_slice(&seq, &[1, seq.len() as i64])?;
        let l = logits_of(&m, &x)?;
        let last = &l[(seq.len() - 1) * v..];
        let best = (0..v).fold(0, |bi, i| if last[i] > last[bi] { i } else { bi });
        want_tokens.push(best as i32);
        seq.push(best as i64);
    }
    assert_eq!(m.generate(&[3, 1, 4], 5, &Sampling::greedy())?, want_tokens);
    let s = Sampling { temperature: 0.8, top_k: 10, seed: 3, ..Sampling::default() };
    assert_eq!(m.generate(&[3, 1, 4], 4, &s)?, m.generate(&[3, 1, 4], 4, &s)?);

    // a training step through a graph lowers the loss
    let params = m.named_parameters()?;
    assert_eq!(params[0].0, "model.embed_tokens.weight");
    let refs: Vec<&Tensor> = params.iter().map(|(_, p)| p).collect();
    let mut opt = Optimizer::new(OptimKind::AdamW, &refs, &Options::new(OptimKind::AdamW).lr(1e-2))?;
    let g = Graph::new()?;
    let (_, l0) = m.forward_graph(&g, &idx, Some(&tg))?;
    let l0 = l0.unwrap();
    g.backward(&l0)?;
    g.clear()?;
    opt.step()?;
    let l1 = m.forward(&idx, Some(&tg))?.1.unwrap().item()?;
    assert!(l1 < l0.item()?, "one AdamW step: {} -> {l1}", l0.item()?);
    Ok(())
}

#[test]
fn load_model_reads_every_kind_of_file() -> Result<()> {
    let dir = TempDir::new("files");
    let m = llama(2, DType::F32, 5)?;
    let idx = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6, 7, 8], &[2, 4])?;
    let want = logits_of(&m, &idx)?;

    let ckpt = dir.0.join("llama.safetensors");
    m.save(&ckpt)?;
    assert_eq!(logits_of(&load_model(&ckpt)?, &idx)?, want, "a checkpoint file");

    let hf = dir.0.join("hf");
    m.save_hf(&hf, Some(1), Some(2))?;
    let text = std::fs::read_to_string(hf.join("config.json")).unwrap();
    assert!(text.contains("\"llama\""), "{text}");
    let h = load_model(&hf)?;
    assert_eq!(h.config()?.n_kv_head, 2);
    assert_eq!(logits_of(&h, &idx)?, want, "a Hugging Face directory");

    // a run directory has config.json too; checkpoint.json tells it apart. An f64 model shows which
    // loader ran: the checkpoint keeps f64, the Hugging Face loader gives f32.
    let run = dir.0.join("run");
    let m64 = llama(1, DType::F64, 1)?;
    m64.save_hf(&run, None, None)?;
    m64.save(run.join("model.safetensors"))?;
    std::fs::write(run.join("checkpoint.json"), "{\"files\": []}").unwrap();
    assert_eq!(load_model(&run)?.config()?.dtype, DType::F64);
    std::fs::remove_file(run.join("checkpoint.json")).unwrap();
    assert_eq!(load_model(&run)?.config()?.dtype, DType::F32);
    let only = dir.0.join("only");
    std::fs::create_dir_all(&only).unwrap();
    m64.save(only.join("model.safetensors"))?;
    assert_eq!(load_model(&only)?.config()?.dtype, DType::F64);

    // GPT-2 as an llm.c checkpoint
    let mut c = GptConfig::preset("char-tiny")?;
    (c.vocab_size, c.n_layer, c.n_head, c.n_embd, c.block_size) = (40, 1, 2, 32, 16);
    let g = Gpt::new(&c, 2)?;
    assert_eq!(g.config()?.arch, Arch::Gpt2);
    let bin = dir.0.join("gpt2.bin");
    g.save_llmc(&bin)?;
    assert_eq!(logits_of(&load_model(&bin)?, &idx)?, logits_of(&g, &idx)?, "an llm.c file");
    Ok(())
}

#[test]
fn load_model_errors_name_the_path() {
    let dir = TempDir::new("errors");
    let e = load_model(dir.0.join("absent")).err().unwrap();
    assert_eq!(e.status, sys::TFC_ERR_IO);
    assert!(e.message.contains("absent") && e.message.contains("does not exist") && e.message.contains("config.json"), "{e}");
    let empty = dir.0.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "hello").unwrap();
    let e = load_model(&empty).err().unwrap();
    assert_eq!(e.status, sys::TFC_ERR_IO);
    assert!(e.message.contains("neither config.json"), "{e}");
    let random = dir.0.join("random.bin");
    std::fs::write(&random, [0x13u8, 0x37, 0xfe, 0x01].repeat(1000)).unwrap();
    let e = load_model(&random).err().unwrap();
    assert_eq!(e.status, sys::TFC_ERR_FORMAT);
    assert!(e.message.contains("random.bin") && e.message.contains("is not a model file"), "{e}");
    std::fs::write(dir.0.join("short"), b"ab").unwrap();
    assert_eq!(load_model(dir.0.join("short")).err().unwrap().status, sys::TFC_ERR_FORMAT);
    // the library's own errors come through with its message
    let m = llama(1, DType::F32, 0).unwrap();
    let bad = Tensor::from_slice(&[1i64, 50], &[1, 2]).unwrap();
    let e = m.forward(&bad, None).err().unwrap();
    assert!(e.message.contains("tfc_gpt_forward"), "{e}");
    let c = GptConfig { n_kv_head: 3, ..GptConfig::default() };
    let e = Gpt::new(&c, 0).err().unwrap();
    assert!(e.message.contains("n_kv_head"), "{e}");
}

/// Directories the real `tfcore train` writes, when TFCORE_CLI names it (meson's rust-cargo test sets it).
#[test]
fn load_model_reads_tfcore_train_directories() -> Result<()> {
    let Some(cli) = std::env::var_os("TFCORE_CLI").filter(|c| !c.is_empty()) else {
        eprintln!("TFCORE_CLI unset: the tfcore train directories are not checked");
        return Ok(());
    };
    let dir = TempDir::new("runs");
    let corpus = dir.0.join("corpus.txt");
    std::fs::write(&corpus, "the quick brown fox jumps over the lazy dog. ".repeat(200)).unwrap();
    let train = |out: &std::path::Path, extra: &[&str]| {
        let st = std::process::Command::new(&cli)
            .arg("train")
            .args(["--data", corpus.to_str().unwrap(), "--batch", "2", "--steps", "2", "--eval-every", "100"])
            .args(["--eval-batches", "1", "--sample-tokens", "0", "--out", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    };
    let base = dir.0.join("base");
    train(&base, &["--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "16"]);
    let idx = Tensor::from_slice(&[1i64, 2, 3, 4], &[1, 4])?;
    let direct = Gpt::load(base.join("model.safetensors"))?;
    assert_eq!(logits_of(&load_model(&base)?, &idx)?, logits_of(&direct, &idx)?, "a run directory");
    let lora = dir.0.join("lora");
    train(&lora, &["--lora-rank", "2", "--lr", "1e-2", "--lora-base", base.to_str().unwrap()]);
    let mut want = Gpt::load(base.join("model.safetensors"))?;
    want.load_lora(&lora)?;
    let got = logits_of(&load_model(&lora)?, &idx)?;
    assert_eq!(got, logits_of(&want, &idx)?, "a LoRA run: base + adapters");
    assert_ne!(got, logits_of(&direct, &idx)?, "the adapters trained");
    Ok(())
}
