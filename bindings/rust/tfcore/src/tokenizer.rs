//! Byte-level BPE tokenizer (tokenizer.h): train, encode, decode, files.
use std::ffi::CString;
use std::ptr::{self, NonNull};

use tfcore_sys as sys;

use crate::error::{check, Error, Result};

/// Pre-tokenizer split pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitPattern {
    None,
    Gpt2,
    Cl100k,
}

impl SplitPattern {
    fn raw(self) -> i32 {
        match self {
            SplitPattern::None => sys::TFC_SPLIT_NONE,
            SplitPattern::Gpt2 => sys::TFC_SPLIT_GPT2,
            SplitPattern::Cl100k => sys::TFC_SPLIT_CL100K,
        }
    }
}

/// How encode treats text equal to a registered special token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// Ordinary bytes (tiktoken's encode_ordinary).
    AsText,
    /// Mapped to the special token's id.
    Allowed,
    /// An error.
    Disallowed,
}

impl Special {
    fn raw(self) -> i32 {
        match self {
            Special::AsText => sys::TFC_SPECIAL_AS_TEXT,
            Special::Allowed => sys::TFC_SPECIAL_ALLOWED,
            Special::Disallowed => sys::TFC_SPECIAL_DISALLOWED,
        }
    }
}

/// Memory the library returned, freed with tfc_free on drop.
struct Owned<T>(*mut T);
impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        unsafe { sys::tfc_free(self.0.cast()) }
    }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::TFC_ERR_INVALID_ARG, format!("tfcore: string {s:?} contains NUL")))
}

pub struct Tokenizer {
    raw: NonNull<sys::tfc_tokenizer>,
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        unsafe { sys::tfc_tokenizer_release(self.raw.as_ptr()) }
    }
}

fn wrap(f: impl FnOnce(*mut *mut sys::tfc_tokenizer) -> sys::tfc_status) -> Result<Tokenizer> {
    let mut raw = ptr::null_mut();
    check(f(&mut raw))?;
    NonNull::new(raw)
        .map(|raw| Tokenizer { raw })
        .ok_or_else(|| Error::new(sys::TFC_ERR_INTERNAL, "tokenizer call gave no tokenizer"))
}

impl Tokenizer {
    /// Untrained: the 256 byte tokens, no merges.
    pub fn new(pattern: SplitPattern) -> Result<Tokenizer> {
        wrap(|o| unsafe { sys::tfc_tokenizer_new(pattern.raw(), o) })
    }

    /// A file written by [`Tokenizer::save`].
    pub fn load(path: &str) -> Result<Tokenizer> {
        let p = cstring(path)?;
        wrap(|o| unsafe { sys::tfc_tokenizer_load(p.as_ptr(), o) })
    }

    fn t(&self) -> *mut sys::tfc_tokenizer {
        self.raw.as_ptr()
    }

    /// Learn merges on `text` until the vocabulary has vocab_size tokens.
    pub fn train(&mut self, text: &[u8], vocab_size: i32) -> Result<()> {
        check(unsafe { sys::tfc_tokenizer_train(self.t(), text.as_ptr().cast(), text.len(), vocab_size) })
    }

    pub fn add_special(&mut self, text: &str, id: i32) -> Result<()> {
        let c = cstring(text)?;
        check(unsafe { sys::tfc_tokenizer_add_special(self.t(), c.as_ptr(), id) })
    }

    pub fn encode(&self, text: &[u8], special: Special) -> Result<Vec<i32>> {
        let mut ids: *mut i32 = ptr::null_mut();
        let mut n = 0usize;
        check(unsafe { sys::tfc_tokenizer_encode(self.t(), text.as_ptr().cast(), text.len(), special.raw(), &mut ids, &mut n) })?;
        let owned = Owned(ids);
        Ok(if n == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(owned.0, n) }.to_vec() })
    }

    /// The exact bytes the ids stand for.
    pub fn decode(&self, ids: &[i32]) -> Result<Vec<u8>> {
        let mut bytes: *mut std::ffi::c_char = ptr::null_mut();
        let mut len = 0usize;
        check(unsafe { sys::tfc_tokenizer_decode(self.t(), ids.as_ptr(), ids.len(), &mut bytes, &mut len) })?;
        let owned = Owned(bytes);
        Ok(unsafe { std::slice::from_raw_parts(owned.0.cast::<u8>(), len) }.to_vec())
    }

    pub fn vocab_size(&self) -> Result<i32> {
        let mut n = 0;
        check(unsafe { sys::tfc_tokenizer_vocab_size(self.t(), &mut n) })?;
        Ok(n)
    }

    pub fn save(&self, path: &str) -> Result<()> {
        let p = cstring(path)?;
        check(unsafe { sys::tfc_tokenizer_save(self.t(), p.as_ptr()) })
    }
}
