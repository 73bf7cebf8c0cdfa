//! The CBOR this crate reads and writes: the abstract security block is a CBOR sequence of
//! integers, byte strings, arrays and an endpoint id (RFC 9172 §3.6), and a context parameter or
//! result may hold any item. Strict like `wire`'s reader: shortest-form heads only (RFC 9172
//! §3.6 requires deterministic encoding), every length checked against the input before use,
//! bounded nesting when skipping an item of unknown shape.

use bytes::Bytes;

use crate::error::AsbError;

const UINT: u8 = 0;
const NINT: u8 = 1;
const BYTES: u8 = 2;
const TEXT: u8 = 3;
const ARRAY: u8 = 4;
const MAP: u8 = 5;
const TAG: u8 = 6;
const SIMPLE: u8 = 7;

/// Nesting deeper than this in a parameter or result value is refused, not walked.
const MAX_DEPTH: usize = 16;

/// A cursor over one buffer of CBOR.
pub(crate) struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a Bytes) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], AsbError> {
        if n > self.remaining() {
            return Err(AsbError::Truncated { at: self.pos });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// An item head: major type and argument, in its shortest form. Indefinite lengths are
    /// refused: RFC 9172 §3.6 asks for deterministic CBOR, which has none.
    fn head(&mut self) -> Result<(u8, u64), AsbError> {
        let at = self.pos;
        let initial = self.take(1)?[0];
        let major = initial >> 5;
        let info = initial & 0x1f;
        let (value, min) = match info {
            0..=23 => (u64::from(info), 0),
            24 => (u64::from(self.take(1)?[0]), 24),
            25 => {
                let b = self.take(2)?;
                (u64::from(u16::from_be_bytes([b[0], b[1]])), 0x100)
            }
            26 => {
                let b = self.take(4)?;
                (
                    u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
                    0x1_0000,
                )
            }
            27 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                (u64::from_be_bytes(a), 0x1_0000_0000)
            }
            _ => return Err(AsbError::BadCbor { at }),
        };
        // Floats (major 7 with 25..=27) have no shortest-form rule of this kind.
        if major != SIMPLE && value < min {
            return Err(AsbError::BadCbor { at });
        }
        Ok((major, value))
    }

    /// An unsigned integer.
    pub(crate) fn uint(&mut self, what: &'static str) -> Result<u64, AsbError> {
        let at = self.pos;
        match self.head()? {
            (UINT, v) => Ok(v),
            _ => Err(AsbError::Unexpected { at, what }),
        }
    }

    /// A signed integer (security context ids may be negative, RFC 9172 §3.6).
    pub(crate) fn int(&mut self, what: &'static str) -> Result<i64, AsbError> {
        let at = self.pos;
        match self.head()? {
            (UINT, v) => i64::try_from(v).map_err(|_| AsbError::Unexpected { at, what }),
            (NINT, v) => i64::try_from(v)
                .map(|v| -1 - v)
                .map_err(|_| AsbError::Unexpected { at, what }),
            _ => Err(AsbError::Unexpected { at, what }),
        }
    }

    /// A byte string, as a slice of the buffer.
    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<Bytes, AsbError> {
        let at = self.pos;
        match self.head()? {
            (BYTES, len) => {
                let len = self.checked_len(at, len)?;
                let start = self.pos;
                self.pos += len;
                Ok(self.buf.slice(start..start + len))
            }
            _ => Err(AsbError::Unexpected { at, what }),
        }
    }

    /// An array head: its item count, checked against the input (each item takes a byte) and
    /// against `max`.
    pub(crate) fn array(&mut self, what: &'static str, max: usize) -> Result<usize, AsbError> {
        let at = self.pos;
        match self.head()? {
            (ARRAY, n) => {
                let n = self.checked_len(at, n)?;
                if n > max {
                    return Err(AsbError::TooMany { what, max });
                }
                Ok(n)
            }
            _ => Err(AsbError::Unexpected { at, what }),
        }
    }

    /// The next item whole, whatever it is, as a slice of the buffer.
    pub(crate) fn item(&mut self) -> Result<Bytes, AsbError> {
        let start = self.pos;
        self.skip_item()?;
        Ok(self.buf.slice(start..self.pos))
    }

    /// Where the rest of the buffer starts, for a decoder of its own (an endpoint id).
    pub(crate) fn rest(&self) -> Bytes {
        self.buf.slice(self.pos..)
    }

    pub(crate) fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }

    fn checked_len(&self, at: usize, len: u64) -> Result<usize, AsbError> {
        match usize::try_from(len) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(AsbError::Truncated { at }),
        }
    }

    fn skip_item(&mut self) -> Result<(), AsbError> {
        // Items still to skip at each level, innermost last.
        let mut pending: Vec<u64> = vec![1];
        while let Some(left) = pending.last_mut() {
            if *left == 0 {
                pending.pop();
                continue;
            }
            *left -= 1;
            let at = self.pos;
            let (major, arg) = self.head()?;
            let inner = match major {
                UINT | NINT | SIMPLE => None,
                BYTES | TEXT => {
                    let len = self.checked_len(at, arg)?;
                    self.pos += len;
                    None
                }
                ARRAY => {
                    self.checked_len(at, arg)?;
                    Some(arg)
                }
                MAP => {
                    let items = arg.checked_mul(2).ok_or(AsbError::Truncated { at })?;
                    self.checked_len(at, items)?;
                    Some(items)
                }
                TAG => Some(1),
                _ => return Err(AsbError::BadCbor { at }),
            };
            if let Some(n) = inner {
                if pending.len() > MAX_DEPTH {
                    return Err(AsbError::TooDeep { at });
                }
                pending.push(n);
            }
        }
        Ok(())
    }
}

/// Appends an item head in its shortest form.
pub(crate) fn put_head(out: &mut Vec<u8>, major: u8, value: u64) {
    let m = major << 5;
    if value < 24 {
        out.push(m | value as u8);
    } else if let Ok(v) = u8::try_from(value) {
        out.extend_from_slice(&[m | 24, v]);
    } else if let Ok(v) = u16::try_from(value) {
        out.push(m | 25);
        out.extend_from_slice(&v.to_be_bytes());
    } else if let Ok(v) = u32::try_from(value) {
        out.push(m | 26);
        out.extend_from_slice(&v.to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub(crate) fn put_uint(out: &mut Vec<u8>, value: u64) {
    put_head(out, UINT, value);
}

pub(crate) fn put_int(out: &mut Vec<u8>, value: i64) {
    if value >= 0 {
        put_head(out, UINT, value.unsigned_abs());
    } else {
        put_head(out, NINT, (-1 - value).unsigned_abs());
    }
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, value: &[u8]) {
    put_head(out, BYTES, value.len() as u64);
    out.extend_from_slice(value);
}

pub(crate) fn put_array(out: &mut Vec<u8>, len: usize) {
    put_head(out, ARRAY, len as u64);
}

/// The encoding of one unsigned integer.
pub(crate) fn uint_item(value: u64) -> Bytes {
    let mut out = Vec::with_capacity(9);
    put_uint(&mut out, value);
    Bytes::from(out)
}

/// The encoding of one byte string.
pub(crate) fn bytes_item(value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(value.len() + 9);
    put_bytes(&mut out, value);
    Bytes::from(out)
}

/// Reads `item` as exactly one unsigned integer.
pub(crate) fn parse_uint(item: &Bytes, what: &'static str) -> Result<u64, AsbError> {
    let mut r = Reader::new(item);
    let v = r.uint(what)?;
    if !r.is_empty() {
        return Err(AsbError::Unexpected {
            at: r.position(),
            what,
        });
    }
    Ok(v)
}

/// Reads `item` as exactly one byte string.
pub(crate) fn parse_bytes(item: &Bytes, what: &'static str) -> Result<Bytes, AsbError> {
    let mut r = Reader::new(item);
    let v = r.bytes(what)?;
    if !r.is_empty() {
        return Err(AsbError::Unexpected {
            at: r.position(),
            what,
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_in_shortest_form() {
        for v in [
            0i64,
            1,
            23,
            24,
            255,
            256,
            65_535,
            65_536,
            i64::MAX,
            -1,
            -24,
            -25,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            put_int(&mut out, v);
            let b = Bytes::from(out);
            let mut r = Reader::new(&b);
            assert_eq!(r.int("v").unwrap(), v);
            assert!(r.is_empty());
        }
        // 0x18 0x05: 5 in a two-byte form is not deterministic.
        let b = Bytes::from_static(&[0x18, 0x05]);
        assert!(matches!(
            Reader::new(&b).uint("v"),
            Err(AsbError::BadCbor { .. })
        ));
    }

    #[test]
    fn lengths_beyond_the_input_are_refused_before_use() {
        let b = Bytes::from_static(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            Reader::new(&b).bytes("b"),
            Err(AsbError::Truncated { .. })
        ));
        let b = Bytes::from_static(&[0x9a, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            Reader::new(&b).array("a", usize::MAX),
            Err(AsbError::Truncated { .. })
        ));
        let deep = Bytes::from(vec![0x81; 64]);
        assert!(matches!(
            Reader::new(&deep).item(),
            Err(AsbError::Truncated { .. } | AsbError::TooDeep { .. })
        ));
        let mut deep = vec![0x81; 40];
        deep.push(0);
        assert!(matches!(
            Reader::new(&Bytes::from(deep)).item(),
            Err(AsbError::TooDeep { .. })
        ));
    }
}
