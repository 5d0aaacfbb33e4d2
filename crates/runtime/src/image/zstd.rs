//! zstd layers (`application/vnd.oci.image.layer.v1.tar+zstd`) decoded with `ruzstd`, a
//! pure-Rust decoder (no C library to build for the musl binary). A stream may hold several
//! frames one after another (as gzip may hold several members): each is decoded in turn.

use std::io::{BufRead, BufReader, Read};

use ruzstd::streaming_decoder::StreamingDecoder;
use ruzstd::FrameDecoder;

/// A `Read` of the concatenated frames of a zstd stream.
pub(crate) struct MultiZstd<R: Read> {
    state: State<R>,
}

enum State<R: Read> {
    Frame(Box<StreamingDecoder<BufReader<R>, FrameDecoder>>),
    Between(BufReader<R>),
    Done,
}

impl<R: Read> MultiZstd<R> {
    pub(crate) fn new(inner: R) -> Self {
        MultiZstd {
            state: State::Between(BufReader::new(inner)),
        }
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("zstd: {e}"))
}

impl<R: Read> Read for MultiZstd<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return Ok(0),
                State::Between(mut reader) => {
                    if reader.fill_buf()?.is_empty() {
                        return Ok(0);
                    }
                    let dec = StreamingDecoder::new(reader).map_err(invalid)?;
                    self.state = State::Frame(Box::new(dec));
                }
                State::Frame(mut dec) => {
                    if buf.is_empty() {
                        self.state = State::Frame(dec);
                        return Ok(0);
                    }
                    let n = dec.read(buf)?;
                    if n > 0 {
                        self.state = State::Frame(dec);
                        return Ok(n);
                    }
                    self.state = State::Between(dec.into_inner());
                }
            }
        }
    }
}

/// A zstd frame holding `data` in raw blocks (the format's simplest encoding), for tests.
#[cfg(test)]
pub(crate) fn frame(data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd];
    // Frame header descriptor: single segment, 4-byte content size.
    f.push(0xa0);
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let chunks: Vec<&[u8]> = if data.is_empty() {
        vec![&[]]
    } else {
        data.chunks(100_000).collect()
    };
    for (i, chunk) in chunks.iter().enumerate() {
        let last = u32::from(i + 1 == chunks.len());
        let header = last | ((chunk.len() as u32) << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.extend_from_slice(chunk);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_streams_are_errors_not_panics() {
        let junk = [0x28u8, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0];
        let mut out = Vec::new();
        assert!(MultiZstd::new(&junk[..]).read_to_end(&mut out).is_err());
        let mut out = Vec::new();
        assert!(MultiZstd::new(&b"not zstd"[..])
            .read_to_end(&mut out)
            .is_err());
        let mut out = Vec::new();
        assert_eq!(MultiZstd::new(&b""[..]).read_to_end(&mut out).unwrap(), 0);
    }

    #[test]
    fn concatenated_frames_decode_in_turn() {
        // Two frames made by `zstd` 1.5 (`printf hello | zstd`, `printf world | zstd`).
        let one = frame(b"hello ");
        let two = frame(b"world");
        let mut both = one.clone();
        both.extend_from_slice(&two);
        let mut out = Vec::new();
        MultiZstd::new(&both[..]).read_to_end(&mut out).unwrap();
        assert_eq!(out, b"hello world");
    }
}
