//! Tokenizer round trips through the safe wrapper.
use tfcore::{sys, Special, SplitPattern, Tokenizer};

#[test]
fn train_encode_decode_roundtrip() -> tfcore::Result<()> {
    let corpus = "the quick brown fox jumps over the lazy dog. ".repeat(40)
        + &"tokenizers merge frequent pairs of bytes; ".repeat(30);
    let mut tok = Tokenizer::new(SplitPattern::Gpt2)?;
    tok.train(corpus.as_bytes(), 290)?;
    assert_eq!(tok.vocab_size()?, 290);
    let ids = tok.encode(corpus.as_bytes(), Special::AsText)?;
    assert!(ids.len() < corpus.len() / 2, "{} ids for {} bytes", ids.len(), corpus.len());
    assert_eq!(tok.decode(&ids)?, corpus.as_bytes());
    // arbitrary bytes, including NUL and invalid UTF-8
    let samples: [&[u8]; 5] = [b"", b"fox", b"\0\x01\xff\xfe", "café €".as_bytes(), b"  lazy\n\tdog  "];
    for s in samples {
        assert_eq!(tok.decode(&tok.encode(s, Special::AsText)?)?, s);
    }
    tok.add_special("<|endoftext|>", 290)?;
    assert_eq!(tok.encode(b"<|endoftext|>", Special::Allowed)?, vec![290]);
    let e = tok.encode(b"<|endoftext|>", Special::Disallowed).unwrap_err();
    assert_eq!(e.status, sys::TFC_ERR_INVALID_ARG);
    let path = std::env::temp_dir().join(format!("tfcore-rust-tok-{}.txt", std::process::id()));
    tok.save(path.to_str().unwrap())?;
    let again = Tokenizer::load(path.to_str().unwrap())?;
    std::fs::remove_file(&path).ok();
    assert_eq!(again.encode(corpus.as_bytes(), Special::AsText)?, ids);
    let e = tok.decode(&[5, 1 << 20]).unwrap_err();
    assert!(e.message.contains("tfc_tokenizer_decode"), "{e}");
    Ok(())
}
