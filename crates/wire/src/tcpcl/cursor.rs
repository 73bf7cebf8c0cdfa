//! A bounds-checked reader over one received frame: big-endian integers and zero-copy slices.

use std::ops::Range;

use bytes::Bytes;

use super::error::TcpclError;

/// A cursor over a `Bytes` frame. Every read checks the remaining length first and fails with
/// [`TcpclError::Truncated`] naming the field, so no read can panic.
#[derive(Debug)]
pub(super) struct Cursor<'a> {
    buf: &'a Bytes,
    /// Invariant: `pos <= buf.len()`.
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Claims the next `n` bytes. `n` is a declared length straight from the wire, so it is
    /// compared with what remains before it becomes an index.
    fn range(&mut self, n: u64, what: &'static str) -> Result<Range<usize>, TcpclError> {
        let available = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= available => {
                let range = self.pos..self.pos + n;
                self.pos += n;
                Ok(range)
            }
            _ => Err(TcpclError::Truncated {
                what,
                needed: n,
                available,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], TcpclError> {
        let available = self.remaining();
        let range = self.range(N as u64, what)?;
        self.buf
            .get(range)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or(TcpclError::Truncated {
                what,
                needed: N as u64,
                available,
            })
    }

    pub(super) fn u8(&mut self, what: &'static str) -> Result<u8, TcpclError> {
        self.array::<1>(what).map(|[b]| b)
    }

    pub(super) fn u16(&mut self, what: &'static str) -> Result<u16, TcpclError> {
        self.array(what).map(u16::from_be_bytes)
    }

    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, TcpclError> {
        self.array(what).map(u32::from_be_bytes)
    }

    pub(super) fn u64(&mut self, what: &'static str) -> Result<u64, TcpclError> {
        self.array(what).map(u64::from_be_bytes)
    }

    /// The next `n` bytes as a slice of the frame (no copy).
    pub(super) fn bytes(&mut self, n: u64, what: &'static str) -> Result<Bytes, TcpclError> {
        let range = self.range(n, what)?;
        Ok(self.buf.slice(range))
    }

    /// Fails unless the whole frame has been read.
    pub(super) fn finish(&self) -> Result<(), TcpclError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(TcpclError::TrailingBytes(n)),
        }
    }
}
