//! Content digests (`sha256:<hex>`) and the verified copy of a blob.

use std::fmt;
use std::io::{Read, Write};

use sha2::{Digest as _, Sha256};

/// A parsed `sha256:` digest: exactly 64 lowercase hex digits, so it is always safe to use
/// as a file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 hex>`; `None` for any other algorithm or a malformed value.
    pub fn parse(text: &str) -> Option<Digest> {
        let hex = text.strip_prefix("sha256:")?;
        Digest::from_hex(hex)
    }

    /// A digest from its bare hex form.
    pub fn from_hex(hex: &str) -> Option<Digest> {
        let ok = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then(|| Digest {
            hex: hex.to_string(),
        })
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest {
            hex: hex(&Sha256::digest(bytes)),
        }
    }

    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The first 12 hex digits, as `image ls` shows them.
    pub fn short(&self) -> &str {
        &self.hex[..12]
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Digest::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a sha256:<64 hex digits> digest"))
        })
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A reader that hashes and counts what passes through it.
pub struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest of the stream (hashing it) and returns the digest and byte count.
    pub fn finish(mut self) -> std::io::Result<(Digest, u64)> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok((
            Digest {
                hex: hex(&self.hasher.finalize()),
            },
            self.count,
        ))
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// What a verified copy found when the content did not match its descriptor.
#[derive(Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// More or fewer bytes than the descriptor's size (`None`: more than the size).
    Size {
        expected: u64,
        actual: Option<u64>,
    },
    Digest {
        expected: Digest,
        actual: Digest,
    },
}

/// Copies at most `expected_size + 1` bytes of `src` into `dst`, and checks the size and the
/// digest. Nothing beyond the declared size is read, so a huge or endless source cannot fill
/// the disk.
pub fn copy_verified(
    src: impl Read,
    mut dst: impl Write,
    expected: &Digest,
    expected_size: u64,
) -> std::io::Result<Result<(), Mismatch>> {
    let mut reader = Hashing::new(src.take(expected_size.saturating_add(1)));
    std::io::copy(&mut reader, &mut dst)?;
    dst.flush()?;
    let (actual, count) = reader.finish()?;
    if count != expected_size {
        let actual = (count <= expected_size).then_some(count);
        return Ok(Err(Mismatch::Size {
            expected: expected_size,
            actual,
        }));
    }
    if &actual != expected {
        return Ok(Err(Mismatch::Digest {
            expected: expected.clone(),
            actual,
        }));
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parse_accepts_only_sha256_hex() {
        assert_eq!(
            Digest::parse(&format!("sha256:{EMPTY}")).unwrap().hex(),
            EMPTY
        );
        for bad in [
            EMPTY.to_string(),
            format!("sha512:{EMPTY}"),
            format!("sha256:{}", EMPTY.to_uppercase()),
            format!("sha256:{}", &EMPTY[1..]),
            "sha256:../../../../etc/passwd".into(),
            format!("sha256:{EMPTY}/.."),
        ] {
            assert_eq!(Digest::parse(&bad), None, "{bad}");
        }
        assert_eq!(Digest::of(b"").hex(), EMPTY);
    }

    #[test]
    fn verified_copy_checks_size_and_digest() {
        let good = Digest::of(b"hello");
        let mut out = Vec::new();
        assert_eq!(
            copy_verified(&b"hello"[..], &mut out, &good, 5).unwrap(),
            Ok(())
        );
        assert_eq!(out, b"hello");

        let r = copy_verified(&b"hellx"[..], Vec::new(), &good, 5).unwrap();
        assert!(matches!(r, Err(Mismatch::Digest { .. })), "{r:?}");
        let r = copy_verified(&b"hell"[..], Vec::new(), &good, 5).unwrap();
        assert_eq!(
            r,
            Err(Mismatch::Size {
                expected: 5,
                actual: Some(4)
            })
        );
        // A longer source is cut off after size+1 bytes.
        let mut out = Vec::new();
        let r = copy_verified(&b"hello, world"[..], &mut out, &good, 5).unwrap();
        assert_eq!(
            r,
            Err(Mismatch::Size {
                expected: 5,
                actual: None
            })
        );
        assert_eq!(out.len(), 6);
    }
}
