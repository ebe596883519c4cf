//! Decoder models (gpt.h, io.h): GPT-2 and the Llama family. A [`GptConfig`]
//! builds one ([`Gpt::new`]); [`load_model`] reads one from whichever file
//! or directory holds it; [`Gpt::forward`] gives logits and the loss.
use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::ptr::{self, NonNull};

use tfcore_sys as sys;

use crate::error::{check, Error, Result};
use crate::graph::Graph;
use crate::tensor::{DType, Tensor};

/// The architecture a config describes (`tfc_gpt_arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// LayerNorm, learned positions, GELU MLP, Conv1D `[in, out]` weights.
    Gpt2,
    /// RMSNorm, RoPE, SwiGLU, grouped-query attention, `[out, in]` weights.
    Llama,
    /// Llama's blocks, no biases, an optional sliding window.
    Mistral,
    /// Llama's blocks with q/k/v biases, an optional sliding window.
    Qwen2,
}

impl Arch {
    pub fn raw(self) -> i32 {
        match self {
            Arch::Gpt2 => sys::TFC_GPT_ARCH_GPT2,
            Arch::Llama => sys::TFC_GPT_ARCH_LLAMA,
            Arch::Mistral => sys::TFC_GPT_ARCH_MISTRAL,
            Arch::Qwen2 => sys::TFC_GPT_ARCH_QWEN2,
        }
    }

    pub fn from_raw(a: i32) -> Option<Arch> {
        [Arch::Gpt2, Arch::Llama, Arch::Mistral, Arch::Qwen2].into_iter().find(|x| x.raw() == a)
    }

    /// "gpt2", "llama", "mistral", "qwen2": the model_type of a Hugging Face config.json.
    pub fn name(self) -> &'static str {
        unsafe { CStr::from_ptr(sys::tfc_gpt_arch_name(self.raw())) }.to_str().unwrap_or("?")
    }
}

/// Rotary positions (`tfc_rope_config`; config.json's rope_theta and rope_scaling).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    /// `sys::TFC_ROPE_DEFAULT` (no scaling), `_LINEAR`, `_DYNAMIC` or `_LLAMA3`.
    pub rope_type: i32,
    pub theta: f64,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: i64,
    pub max_position_embeddings: i64,
}

impl Default for Rope {
    /// TFC_ROPE_CONFIG_INIT: Llama 2's theta, no scaling.
    fn default() -> Rope {
        Rope {
            rope_type: sys::TFC_ROPE_DEFAULT,
            theta: 10000.0,
            factor: 1.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
            max_position_embeddings: 2048,
        }
    }
}

/// Model hyper-parameters (`tfc_gpt_config`; gpt.h documents each field).
/// `Default` is TFC_GPT_CONFIG_INIT: the char-tiny preset (GPT-2) with a
/// 256-token vocabulary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GptConfig {
    pub arch: Arch,
    pub n_layer: i32,
    pub n_head: i32,
    /// Key/value heads (grouped-query attention); 0: n_head.
    pub n_kv_head: i32,
    pub n_embd: i32,
    pub block_size: i32,
    pub vocab_size: i32,
    /// The MLP's inner width; 0: the family's default.
    pub mlp_hidden: i64,
    /// GPT-2: Linear and LayerNorm biases.
    pub bias: bool,
    pub tie_weights: bool,
    /// F32 or F64.
    pub dtype: DType,
    pub ln_eps: f64,
    pub dropout: f64,
    pub rope: Rope,
    pub attention_bias: bool,
    pub mlp_bias: bool,
    /// Mistral, Qwen2: a query sees at most this many keys; 0: all.
    pub sliding_window: i32,
}

impl Default for GptConfig {
    fn default() -> GptConfig {
        GptConfig {
            arch: Arch::Gpt2,
            n_layer: 4,
            n_head: 4,
            n_kv_head: 0,
            n_embd: 128,
            block_size: 128,
            vocab_size: 256,
            mlp_hidden: 0,
            bias: true,
            tie_weights: true,
            dtype: DType::F32,
            ln_eps: 1e-5,
            dropout: 0.0,
            rope: Rope::default(),
            attention_bias: false,
            mlp_bias: false,
            sliding_window: 0,
        }
    }
}

fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::TFC_ERR_INVALID_ARG, format!("tfcore: {what} {s:?} contains NUL")))
}

fn path_cstring(fn_name: &str, p: &Path) -> Result<CString> {
    let s = p.to_str().ok_or_else(|| {
        Error::new(sys::TFC_ERR_INVALID_ARG, format!("{fn_name}: the path {} is not UTF-8", p.display()))
    })?;
    cstring("path", s)
}

impl GptConfig {
    /// A named preset ("char-tiny", "char-small", "gpt2-mini", "gpt2", "llama-tiny")
    /// over the defaults; change fields afterwards (`cfg.vocab_size = 65`).
    pub fn preset(name: &str) -> Result<GptConfig> {
        let mut raw = GptConfig::default().to_raw();
        let n = cstring("preset", name)?;
        check(unsafe { sys::tfc_gpt_config_preset(n.as_ptr(), &mut raw) })?;
        GptConfig::from_raw(&raw)
    }

    pub fn to_raw(&self) -> sys::tfc_gpt_config {
        let r = &self.rope;
        sys::tfc_gpt_config {
            struct_size: std::mem::size_of::<sys::tfc_gpt_config>() as u32,
            n_layer: self.n_layer,
            n_head: self.n_head,
            n_embd: self.n_embd,
            block_size: self.block_size,
            vocab_size: self.vocab_size,
            bias: self.bias as i32,
            tie_weights: self.tie_weights as i32,
            dtype: self.dtype.raw(),
            ln_eps: self.ln_eps,
            dropout: self.dropout,
            arch: self.arch.raw(),
            n_kv_head: self.n_kv_head,
            mlp_hidden: self.mlp_hidden,
            rope: sys::tfc_rope_config {
                struct_size: std::mem::size_of::<sys::tfc_rope_config>() as u32,
                rope_type: r.rope_type,
                theta: r.theta,
                factor: r.factor,
                low_freq_factor: r.low_freq_factor,
                high_freq_factor: r.high_freq_factor,
                original_max_position_embeddings: r.original_max_position_embeddings,
                max_position_embeddings: r.max_position_embeddings,
            },
            attention_bias: self.attention_bias as i32,
            mlp_bias: self.mlp_bias as i32,
            sliding_window: self.sliding_window,
        }
    }

    pub fn from_raw(c: &sys::tfc_gpt_config) -> Result<GptConfig> {
        let arch = Arch::from_raw(c.arch)
            .ok_or_else(|| Error::new(sys::TFC_ERR_INVALID_ARG, format!("tfcore: unknown arch {}", c.arch)))?;
        let dtype = DType::from_raw(c.dtype)
            .ok_or_else(|| Error::new(sys::TFC_ERR_DTYPE, format!("tfcore: unknown dtype {}", c.dtype)))?;
        let r = &c.rope;
        Ok(GptConfig {
            arch,
            n_layer: c.n_layer,
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            n_embd: c.n_embd,
            block_size: c.block_size,
            vocab_size: c.vocab_size,
            mlp_hidden: c.mlp_hidden,
            bias: c.bias != 0,
            tie_weights: c.tie_weights != 0,
            dtype,
            ln_eps: c.ln_eps,
            dropout: c.dropout,
            rope: Rope {
                rope_type: r.rope_type,
                theta: r.theta,
                factor: r.factor,
                low_freq_factor: r.low_freq_factor,
                high_freq_factor: r.high_freq_factor,
                original_max_position_embeddings: r.original_max_position_embeddings,
                max_position_embeddings: r.max_position_embeddings,
            },
            attention_bias: c.attention_bias != 0,
            mlp_bias: c.mlp_bias != 0,
            sliding_window: c.sliding_window,
        })
    }
}

/// How [`Gpt::generate`] draws each token (tfc_sample's rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0: greedy (the first maximum).
    pub temperature: f64,
    /// 0: every token.
    pub top_k: i32,
    /// 1: every token.
    pub top_p: f64,
    /// Token i is drawn with the Philox stream (seed, i).
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Sampling {
        Sampling { temperature: 1.0, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

impl Sampling {
    pub fn greedy() -> Sampling {
        Sampling { temperature: 0.0, ..Sampling::default() }
    }
}

/// A model: one `tfc_gpt`, released on drop.
pub struct Gpt {
    raw: NonNull<sys::tfc_gpt>,
}

impl Drop for Gpt {
    fn drop(&mut self) {
        unsafe { sys::tfc_gpt_release(self.raw.as_ptr()) }
    }
}

fn wrap(f: impl FnOnce(*mut *mut sys::tfc_gpt) -> sys::tfc_status) -> Result<Gpt> {
    let mut raw = ptr::null_mut();
    check(f(&mut raw))?;
    NonNull::new(raw)
        .map(|raw| Gpt { raw })
        .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfcore: model call gave no model"))
}

impl Gpt {
    /// A new model from the Philox stream `seed` (gpt.h's initialisation).
    pub fn new(cfg: &GptConfig, seed: u64) -> Result<Gpt> {
        let raw = cfg.to_raw();
        wrap(|o| unsafe { sys::tfc_gpt_new(&raw, seed, o) })
    }

    /// A file written by [`Gpt::save`] (tfc_gpt_load).
    pub fn load(path: impl AsRef<Path>) -> Result<Gpt> {
        let p = path_cstring("Gpt::load", path.as_ref())?;
        wrap(|o| unsafe { sys::tfc_gpt_load(p.as_ptr(), o) })
    }

    /// A Hugging Face directory: config.json + model.safetensors (tfc_gpt_load_hf).
    pub fn load_hf(dir: impl AsRef<Path>) -> Result<Gpt> {
        let p = path_cstring("Gpt::load_hf", dir.as_ref())?;
        wrap(|o| unsafe { sys::tfc_gpt_load_hf(p.as_ptr(), o) })
    }

    /// An llm.c GPT-2 checkpoint (tfc_gpt_load_llmc).
    pub fn load_llmc(path: impl AsRef<Path>) -> Result<Gpt> {
        let p = path_cstring("Gpt::load_llmc", path.as_ref())?;
        wrap(|o| unsafe { sys::tfc_gpt_load_llmc(p.as_ptr(), o) })
    }

    /// The raw handle, borrowed (still owned by self).
    pub fn as_ptr(&self) -> *mut sys::tfc_gpt {
        self.raw.as_ptr()
    }

    /// The model's config, with n_kv_head and mlp_hidden resolved from their 0 defaults.
    pub fn config(&self) -> Result<GptConfig> {
        let mut raw = GptConfig::default().to_raw();
        check(unsafe { sys::tfc_gpt_get_config(self.as_ptr(), &mut raw) })?;
        GptConfig::from_raw(&raw)
    }

    /// (logits `[B, T, vocab]`, the mean cross-entropy against targets when given) for
    /// token ids `idx` `[B, T]` (I32 or I64; a target of -100 is skipped). Nothing is
    /// recorded: evaluation and inference.
    pub fn forward(&self, idx: &Tensor, targets: Option<&Tensor>) -> Result<(Tensor, Option<Tensor>)> {
        self.forward_on(ptr::null_mut(), idx, targets)
    }

    /// As [`Gpt::forward`], recorded on `g` so that `g.backward(&loss)` fills the
    /// parameters' gradients (training).
    pub fn forward_graph(&self, g: &Graph, idx: &Tensor, targets: Option<&Tensor>) -> Result<(Tensor, Option<Tensor>)> {
        self.forward_on(g.as_ptr(), idx, targets)
    }

    fn forward_on(&self, g: *mut sys::tfc_graph, idx: &Tensor, targets: Option<&Tensor>) -> Result<(Tensor, Option<Tensor>)> {
        let mut logits: *mut sys::tfc_tensor = ptr::null_mut();
        let mut loss: *mut sys::tfc_tensor = ptr::null_mut();
        let tg = targets.map_or(ptr::null(), |t| t.as_ptr() as *const _);
        let loss_out = if targets.is_some() { &mut loss as *mut _ } else { ptr::null_mut() };
        check(unsafe { sys::tfc_gpt_forward(self.as_ptr(), g, idx.as_ptr(), tg, &mut logits, loss_out) })?;
        // Own both references before anything can fail, so neither leaks.
        let loss = unsafe { Tensor::from_raw(loss) };
        let logits = unsafe { Tensor::from_raw(logits) }
            .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfc_gpt_forward gave no logits"))?;
        Ok((logits, loss))
    }

    /// `max_new` token ids after `prompt`, with a KV cache (tfc_gpt_generate).
    pub fn generate(&self, prompt: &[i32], max_new: usize, sampling: &Sampling) -> Result<Vec<i32>> {
        let n_prompt = i32::try_from(prompt.len())
            .map_err(|_| Error::new(sys::TFC_ERR_INVALID_ARG, "Gpt::generate: the prompt is longer than 2^31-1 ids"))?;
        let n = i32::try_from(max_new)
            .map_err(|_| Error::new(sys::TFC_ERR_INVALID_ARG, "Gpt::generate: max_new is above 2^31-1"))?;
        let mut out = vec![0i32; max_new.max(1)];
        let s = sampling;
        check(unsafe {
            sys::tfc_gpt_generate(self.as_ptr(), prompt.as_ptr(), n_prompt, n, s.temperature, s.top_k, s.top_p, s.seed,
                                  out.as_mut_ptr(), n, None, ptr::null_mut())
        })?;
        out.truncate(max_new);
        Ok(out)
    }

    /// The parameters with their Hugging Face names, in the model's fixed order
    /// (each a new reference to the model's own tensor).
    pub fn named_parameters(&self) -> Result<Vec<(String, Tensor)>> {
        let mut n = 0i32;
        let mut names: *const *const c_char = ptr::null();
        let mut params: *const *mut sys::tfc_tensor = ptr::null();
        check(unsafe { sys::tfc_gpt_params(self.as_ptr(), &mut n, &mut names, &mut params) })?;
        let mut out = Vec::with_capacity(n.max(0) as usize);
        for i in 0..n.max(0) as usize {
            let (name, t) = unsafe { (CStr::from_ptr(*names.add(i)), *params.add(i)) };
            let t = unsafe { Tensor::from_raw(sys::tfc_tensor_retain(t)) }
                .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tfc_gpt_params gave a NULL tensor"))?;
            out.push((name.to_string_lossy().into_owned(), t));
        }
        Ok(out)
    }

    /// Total parameter elements (tied weights once).
    pub fn num_parameters(&self) -> i64 {
        unsafe { sys::tfc_gpt_num_elements(self.as_ptr()) }
    }

    /// A safetensors file under Hugging Face names with the config in its metadata (tfc_gpt_save).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_cstring("Gpt::save", path.as_ref())?;
        check(unsafe { sys::tfc_gpt_save(self.as_ptr(), p.as_ptr(), ptr::null(), ptr::null(), 0) })
    }

    /// config.json + model.safetensors that transformers' from_pretrained reads (tfc_gpt_save_hf).
    pub fn save_hf(&self, dir: impl AsRef<Path>, bos_token_id: Option<i32>, eos_token_id: Option<i32>) -> Result<()> {
        let p = path_cstring("Gpt::save_hf", dir.as_ref())?;
        check(unsafe {
            sys::tfc_gpt_save_hf(self.as_ptr(), p.as_ptr(), bos_token_id.unwrap_or(-1), eos_token_id.unwrap_or(-1))
        })
    }

    /// An llm.c GPT-2 checkpoint (tfc_gpt_save_llmc).
    pub fn save_llmc(&self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_cstring("Gpt::save_llmc", path.as_ref())?;
        check(unsafe { sys::tfc_gpt_save_llmc(self.as_ptr(), p.as_ptr()) })
    }

    /// Attach stored LoRA adapters: a PEFT adapter directory or file (tfc_gpt_load_lora).
    pub fn load_lora(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let p = path_cstring("Gpt::load_lora", path.as_ref())?;
        check(unsafe { sys::tfc_gpt_load_lora(self.as_ptr(), p.as_ptr()) })
    }
}

// ---- load_model ------------------------------------------------------------------------------

const LLMC_MAGIC: u32 = 20240326;
const STAGE: &str = ".checkpoint.new"; // tools/checkpoint.c: a committed save not yet moved into place
const LOOKED_FOR: &str = "a Hugging Face directory (config.json + model.safetensors), a directory of tfcore train \
    (checkpoint.json), a safetensors file of tfc_gpt_save or an llm.c GPT-2 checkpoint (magic 20240326)";
const MAX_BASES: usize = 8; // a LoRA run names its base, which may be a LoRA run: a cycle must end

/// A model from whichever of these `path` is, told by content (as the CLI's
/// tools/model_source.c, Python's `tfcore.load_model` and Lua's tell it):
///
/// - a directory of `tfcore train --out` (checkpoint.json): [`Gpt::load`] of its
///   model.safetensors, or a LoRA run's base (its `lora.base` metadata) with the
///   adapters attached;
/// - a directory with config.json: a Hugging Face directory ([`Gpt::load_hf`]);
/// - a directory with model.safetensors alone: [`Gpt::load`] of it;
/// - a file starting with llm.c's magic: [`Gpt::load_llmc`];
/// - a safetensors file: [`Gpt::load`].
///
/// Errors: a path that does not exist, a directory with none of these files
/// (`TFC_ERR_IO`), a file that is no model (`TFC_ERR_FORMAT`), each naming the
/// path and what was looked for; else the loader's error.
pub fn load_model(path: impl AsRef<Path>) -> Result<Gpt> {
    load_path(path.as_ref(), 0)
}

fn own(status: sys::tfc_status, message: String) -> Error {
    Error::new(status, message)
}

fn load_path(path: &Path, depth: usize) -> Result<Gpt> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| own(sys::TFC_ERR_IO, format!("tfcore::load_model: '{shown}' does not exist ({e}); looked for {LOOKED_FOR}")))?;
    if meta.is_dir() {
        let stage = path.join(STAGE);
        let src = if stage.join("checkpoint.json").is_file() { stage } else { path.to_path_buf() };
        if src.join("checkpoint.json").is_file() {
            return load_run(path, &src, depth);
        }
        if path.join("config.json").is_file() {
            return Gpt::load_hf(path);
        }
        if path.join("model.safetensors").is_file() {
            return Gpt::load(path.join("model.safetensors"));
        }
        return Err(own(
            sys::TFC_ERR_IO,
            format!(
                "tfcore::load_model: directory '{shown}' holds no model: it has neither config.json (a Hugging Face \
                 directory) nor model.safetensors or checkpoint.json (a directory of tfcore train); looked for {LOOKED_FOR}"
            ),
        ));
    }
    let (llmc, safetensors) = sniff(path, meta.len());
    if llmc {
        return Gpt::load_llmc(path);
    }
    if safetensors {
        return Gpt::load(path);
    }
    Err(own(
        sys::TFC_ERR_FORMAT,
        format!(
            "tfcore::load_model: '{shown}' is not a model file: neither an llm.c checkpoint (its first 4 bytes are not \
             the magic {LLMC_MAGIC}) nor a safetensors file (8-byte header length, JSON header); looked for {LOOKED_FOR}"
        ),
    ))
}

/// The first bytes of a file: (llm.c's magic, a plausible safetensors header length followed by '{').
fn sniff(path: &Path, size: u64) -> (bool, bool) {
    use std::io::Read;
    let mut h = [0u8; 9];
    let got = std::fs::File::open(path).and_then(|mut f| {
        let mut n = 0;
        while n < h.len() {
            match f.read(&mut h[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    });
    let got = got.unwrap_or(0);
    let llmc = got >= 4 && u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == LLMC_MAGIC;
    let n = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    let safetensors = got == 9 && h[8] == b'{' && n >= 2 && n <= size.saturating_sub(8);
    (llmc, safetensors)
}

/// A directory of tfcore train (its files in src): its weights, or a LoRA run's base and adapters.
fn load_run(dir: &Path, src: &Path, depth: usize) -> Result<Gpt> {
    let weights = src.join("model.safetensors");
    if weights.is_file() {
        return Gpt::load(weights);
    }
    let adapters = src.join("adapter_model.safetensors");
    if !adapters.is_file() {
        return Err(own(
            sys::TFC_ERR_IO,
            format!(
                "tfcore::load_model: '{}' is a directory of tfcore train (checkpoint.json) without model.safetensors \
                 or adapter_model.safetensors",
                dir.display()
            ),
        ));
    }
    let base = lora_base(&adapters)?;
    if depth >= MAX_BASES {
        return Err(own(
            sys::TFC_ERR_FORMAT,
            format!("tfcore::load_model: '{}': LoRA runs name bases more than {MAX_BASES} deep (a cycle?)", dir.display()),
        ));
    }
    let mut m = load_path(Path::new(&base), depth + 1)?;
    m.load_lora(src)?;
    Ok(m)
}

/// The "lora.base" metadata of a LoRA run's adapter file (small: read whole).
fn lora_base(adapters: &Path) -> Result<String> {
    let p = path_cstring("tfcore::load_model", adapters)?;
    let mut f: *mut sys::tfc_safetensors = ptr::null_mut();
    check(unsafe { sys::tfc_safetensors_load(p.as_ptr(), &mut f) })?;
    let key = cstring("key", "lora.base")?;
    let mut v: *const c_char = ptr::null();
    let found = unsafe { sys::tfc_safetensors_metadata(f, key.as_ptr(), &mut v) } == sys::TFC_OK && !v.is_null();
    let base = if found { Some(unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned()) } else { None };
    unsafe { sys::tfc_safetensors_release(f) };
    unsafe { sys::tfc_clear_error() }; // a missing key is ours to report, below
    base.filter(|b| !b.is_empty()).ok_or_else(|| {
        own(sys::TFC_ERR_FORMAT, format!("tfcore::load_model: {} names no base model (no lora.base metadata)", adapters.display()))
    })
}
