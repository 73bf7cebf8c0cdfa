//! The strict subset of CBOR (RFC 8949) that BPv7 uses: unsigned integers, byte and text strings,
//! arrays (definite or indefinite), booleans. Maps, tags, floats and negative integers never occur
//! in the structures Ferry parses, so the reader refuses them where a value is expected and only
//! steps over them inside items it skips.
//!
//! The reader works on a borrowed slice and hands out byte ranges, so callers can turn them into
//! `Bytes` slices of the received buffer without copying. Every length is checked against the bytes
//! that remain before it is used; nothing is allocated by a declared length.

use std::ops::Range;

use bytes::BufMut;

use crate::error::{DecodeError, DecodeErrorKind as K};

/// CBOR major types.
pub(crate) const UINT: u8 = 0;
pub(crate) const NINT: u8 = 1;
pub(crate) const BYTES: u8 = 2;
pub(crate) const TEXT: u8 = 3;
pub(crate) const ARRAY: u8 = 4;
pub(crate) const MAP: u8 = 5;
pub(crate) const TAG: u8 = 6;
pub(crate) const SIMPLE: u8 = 7;

/// The "break" stop code that ends an indefinite-length item.
pub(crate) const BREAK: u8 = 0xff;
/// The head of an indefinite-length array.
pub(crate) const ARRAY_INDEFINITE: u8 = 0x9f;
const FALSE: u8 = 0xf4;
const TRUE: u8 = 0xf5;

/// Deep enough for every BPv7 structure (a status report nests four levels); anything deeper is
/// refused rather than walked, so hostile nesting cannot exhaust memory or time.
const MAX_SKIP_DEPTH: usize = 16;

/// The argument of an item head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    Value(u64),
    Indefinite,
}

/// A cursor over one CBOR-encoded buffer.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// An array being read: either a known number of items or items up to a break.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Array {
    len: Option<u64>,
    read: u64,
}

impl Array {
    /// Room to reserve for the items: the announced count, at most `max` (a count is only
    /// checked against the input's length, and an item may take far more memory than its bytes
    /// on the wire); 0 for an indefinite array.
    pub(crate) fn capacity_hint(&self, max: usize) -> usize {
        self.len
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX).min(max))
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    pub(crate) fn err(&self, kind: K) -> DecodeError {
        DecodeError::new(self.pos, kind)
    }

    fn err_at(at: usize, kind: K) -> DecodeError {
        DecodeError::new(at, kind)
    }

    #[inline]
    pub(crate) fn peek(&self) -> Result<u8, DecodeError> {
        self.buf
            .get(self.pos)
            .copied()
            .ok_or_else(|| self.err(K::Truncated))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(self.err(K::Truncated)),
        }
    }

    /// Reads an item head, insisting on the shortest encoding of its argument.
    #[inline]
    pub(crate) fn head(&mut self) -> Result<(u8, Arg), DecodeError> {
        let start = self.pos;
        let initial = self.take(1)?[0];
        let major = initial >> 5;
        let info = initial & 0x1f;
        let value = match info {
            0..=23 => return Ok((major, Arg::Value(u64::from(info)))),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(
                self.take(2)?.try_into().expect("2 bytes"),
            )),
            26 => u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            )),
            27 => u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")),
            28..=30 => {
                return Err(Self::err_at(
                    start,
                    K::InvalidCbor("reserved additional information"),
                ));
            }
            _ => {
                // Indefinite length exists for strings, arrays and maps; for the others 31 is
                // either a stray break (major 7) or ill-formed.
                return match major {
                    BYTES | TEXT | ARRAY | MAP => Ok((major, Arg::Indefinite)),
                    SIMPLE => Err(Self::err_at(start, K::InvalidCbor("unexpected break"))),
                    _ => Err(Self::err_at(
                        start,
                        K::InvalidCbor("indefinite length on a scalar"),
                    )),
                };
            }
        };
        // Simple values and floats (major 7) have their own encoding rules; only their size matters
        // to us, and we never accept them as values except the booleans (info < 24).
        if major != SIMPLE && value < shortest_threshold(info) {
            return Err(Self::err_at(start, K::NotDeterministic));
        }
        Ok((major, Arg::Value(value)))
    }

    /// Reads an unsigned integer.
    #[inline]
    pub(crate) fn uint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        match self.head()? {
            (UINT, Arg::Value(v)) => Ok(v),
            _ => Err(Self::err_at(
                start,
                K::UnexpectedType {
                    expected: "unsigned integer",
                },
            )),
        }
    }

    /// Reads a boolean.
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.peek()? {
            FALSE => {
                self.pos += 1;
                Ok(false)
            }
            TRUE => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(self.err(K::UnexpectedType {
                expected: "boolean",
            })),
        }
    }

    /// Reads a definite-length byte string and returns its content's range in the buffer.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<Range<usize>, DecodeError> {
        self.string(BYTES, "byte string")
    }

    /// Reads a definite-length text string without checking that it is UTF-8: for callers that
    /// check something stricter themselves.
    #[inline]
    pub(crate) fn text_unchecked(&mut self) -> Result<Range<usize>, DecodeError> {
        self.string(TEXT, "text string")
    }

    #[inline]
    fn string(&mut self, major: u8, expected: &'static str) -> Result<Range<usize>, DecodeError> {
        let start = self.pos;
        match self.head()? {
            (m, Arg::Value(len)) if m == major => {
                let body = self.pos;
                let len = self.checked_len(start, len)?;
                self.pos += len;
                Ok(body..body + len)
            }
            (m, Arg::Indefinite) if m == major => Err(Self::err_at(
                start,
                K::InvalidCbor("indefinite-length string where a definite one is required"),
            )),
            _ => Err(Self::err_at(start, K::UnexpectedType { expected })),
        }
    }

    /// Checks a declared length against the remaining input before anything uses it.
    #[inline]
    fn checked_len(&self, head_start: usize, len: u64) -> Result<usize, DecodeError> {
        let remaining = self.buf.len() - self.pos;
        match usize::try_from(len) {
            Ok(n) if n <= remaining => Ok(n),
            _ => Err(Self::err_at(
                head_start,
                K::LengthExceedsInput { declared: len },
            )),
        }
    }

    /// Reads an array head.
    #[inline]
    pub(crate) fn array(&mut self) -> Result<Array, DecodeError> {
        let start = self.pos;
        match self.head()? {
            (ARRAY, Arg::Value(len)) => {
                // Each item takes at least one byte: a count beyond the remaining input is a lie
                // we can refuse now rather than discover item by item.
                self.checked_len(start, len)?;
                Ok(Array {
                    len: Some(len),
                    read: 0,
                })
            }
            (ARRAY, Arg::Indefinite) => Ok(Array { len: None, read: 0 }),
            _ => Err(Self::err_at(start, K::UnexpectedType { expected: "array" })),
        }
    }

    /// Whether the array has another item; consumes the break of an indefinite array at its end.
    #[inline]
    pub(crate) fn has_next(&mut self, array: &mut Array) -> Result<bool, DecodeError> {
        let more = match array.len {
            Some(len) => array.read < len,
            None => {
                if self.peek()? == BREAK {
                    self.pos += 1;
                    false
                } else {
                    true
                }
            }
        };
        if more {
            array.read += 1;
        }
        Ok(more)
    }

    /// Reads the items of an array of known shape: requires another item.
    #[inline]
    pub(crate) fn expect_next(
        &mut self,
        array: &mut Array,
        what: &'static str,
    ) -> Result<(), DecodeError> {
        if self.has_next(array)? {
            Ok(())
        } else {
            Err(self.err(K::BadArrayLength {
                what,
                len: array.read,
            }))
        }
    }

    /// Requires that the array has no more items, consuming an indefinite array's break.
    #[inline]
    pub(crate) fn expect_end(
        &mut self,
        array: &mut Array,
        what: &'static str,
    ) -> Result<(), DecodeError> {
        if self.has_next(array)? {
            // Count the extra items for the message without walking the rest of the input.
            let len = array.len.unwrap_or(array.read);
            Err(self.err(K::BadArrayLength { what, len }))
        } else {
            Ok(())
        }
    }

    /// Counts the items of an array by walking them, then rewinds. Used where the shape of a
    /// structure depends on its length and the array may be indefinite.
    pub(crate) fn count_items(&self, array: Array) -> Result<u64, DecodeError> {
        if let Some(len) = array.len {
            return Ok(len);
        }
        let mut probe = self.clone();
        let mut array = array;
        let mut n = 0;
        while probe.has_next(&mut array)? {
            probe.skip_item()?;
            n += 1;
        }
        Ok(n)
    }

    /// Steps over one complete item of any type, with bounded nesting.
    pub(crate) fn skip_item(&mut self) -> Result<(), DecodeError> {
        // Each entry is the number of items still to skip at that level; None = until a break.
        let mut pending: Vec<Option<u64>> = Vec::new();
        let mut remaining: Option<u64> = Some(1);
        loop {
            // Finish levels that are done.
            loop {
                match remaining {
                    Some(0) => match pending.pop() {
                        Some(outer) => remaining = outer,
                        None => return Ok(()),
                    },
                    None if self.peek()? == BREAK => {
                        self.pos += 1;
                        match pending.pop() {
                            Some(outer) => remaining = outer,
                            None => return Ok(()),
                        }
                    }
                    _ => break,
                }
            }
            if let Some(n) = remaining.as_mut() {
                *n -= 1;
            }
            let start = self.pos;
            let (major, arg) = self.head()?;
            let nested = match (major, arg) {
                (UINT | NINT | SIMPLE, _) => None,
                (BYTES | TEXT, Arg::Value(len)) => {
                    let len = self.checked_len(start, len)?;
                    self.pos += len;
                    None
                }
                (BYTES | TEXT, Arg::Indefinite) => {
                    // Chunks of the same major type up to a break.
                    loop {
                        if self.peek()? == BREAK {
                            self.pos += 1;
                            break;
                        }
                        let chunk_start = self.pos;
                        match self.head()? {
                            (m, Arg::Value(len)) if m == major => {
                                let len = self.checked_len(chunk_start, len)?;
                                self.pos += len;
                            }
                            _ => {
                                return Err(Self::err_at(
                                    chunk_start,
                                    K::InvalidCbor("bad chunk in indefinite string"),
                                ));
                            }
                        }
                    }
                    None
                }
                (ARRAY, Arg::Value(n)) => {
                    self.checked_len(start, n)?;
                    Some(Some(n))
                }
                (MAP, Arg::Value(n)) => {
                    let items = n.checked_mul(2).ok_or_else(|| {
                        Self::err_at(start, K::LengthExceedsInput { declared: n })
                    })?;
                    self.checked_len(start, items)?;
                    Some(Some(items))
                }
                (ARRAY | MAP, Arg::Indefinite) => Some(None),
                (TAG, _) => Some(Some(1)),
                _ => return Err(Self::err_at(start, K::InvalidCbor("ill-formed item"))),
            };
            if let Some(inner) = nested {
                if pending.len() >= MAX_SKIP_DEPTH {
                    return Err(Self::err_at(start, K::TooDeep));
                }
                pending.push(remaining);
                remaining = inner;
            }
        }
    }
}

/// The smallest value that may be encoded with the given additional information.
fn shortest_threshold(info: u8) -> u64 {
    match info {
        24 => 24,
        25 => 0x100,
        26 => 0x1_0000,
        27 => 0x1_0000_0000,
        _ => 0,
    }
}

/// Writes an item head in its shortest form.
pub(crate) fn put_head(out: &mut impl BufMut, major: u8, value: u64) {
    let m = major << 5;
    if value < 24 {
        out.put_u8(m | value as u8);
    } else if value <= u64::from(u8::MAX) {
        out.put_u8(m | 24);
        out.put_u8(value as u8);
    } else if value <= u64::from(u16::MAX) {
        out.put_u8(m | 25);
        out.put_u16(value as u16);
    } else if value <= u64::from(u32::MAX) {
        out.put_u8(m | 26);
        out.put_u32(value as u32);
    } else {
        out.put_u8(m | 27);
        out.put_u64(value);
    }
}

/// The encoded size of an item head.
pub(crate) fn head_len(value: u64) -> usize {
    match value {
        0..=23 => 1,
        24..=0xff => 2,
        0x100..=0xffff => 3,
        0x1_0000..=0xffff_ffff => 5,
        _ => 9,
    }
}

pub(crate) fn put_uint(out: &mut impl BufMut, value: u64) {
    put_head(out, UINT, value);
}

pub(crate) fn put_bool(out: &mut impl BufMut, value: bool) {
    out.put_u8(if value { TRUE } else { FALSE });
}

pub(crate) fn put_bytes(out: &mut impl BufMut, value: &[u8]) {
    put_head(out, BYTES, value.len() as u64);
    out.put_slice(value);
}

pub(crate) fn put_text(out: &mut impl BufMut, value: &str) {
    put_head(out, TEXT, value.len() as u64);
    out.put_slice(value.as_bytes());
}

pub(crate) fn put_array(out: &mut impl BufMut, len: u64) {
    put_head(out, ARRAY, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head_of(bytes: &[u8]) -> Result<(u8, Arg), DecodeError> {
        Reader::new(bytes).head()
    }

    #[test]
    fn heads_round_trip_at_every_width_boundary() {
        for v in [
            0,
            23,
            24,
            255,
            256,
            65535,
            65536,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_uint(&mut out, v);
            assert_eq!(out.len(), head_len(v));
            let mut r = Reader::new(&out);
            assert_eq!(r.uint().unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn non_shortest_integers_are_refused() {
        // 5 encoded in one extra byte, 255 in two, 65535 in four.
        for bytes in [&[0x18, 5][..], &[0x19, 0, 255], &[0x1a, 0, 0, 0xff, 0xff]] {
            assert_eq!(head_of(bytes).unwrap_err().kind, K::NotDeterministic);
        }
    }

    #[test]
    fn reserved_and_truncated_heads_are_errors() {
        assert!(matches!(
            head_of(&[0x1c]).unwrap_err().kind,
            K::InvalidCbor(_)
        ));
        assert_eq!(head_of(&[0x19, 1]).unwrap_err().kind, K::Truncated);
        assert_eq!(head_of(&[]).unwrap_err().kind, K::Truncated);
        assert!(matches!(
            head_of(&[0xff]).unwrap_err().kind,
            K::InvalidCbor(_)
        ));
    }

    #[test]
    fn huge_lengths_are_refused_before_use() {
        // A byte string claiming 2^64-1 bytes, and an array claiming 2^32 items, in a few bytes.
        let bstr = [0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            Reader::new(&bstr).bytes().unwrap_err().kind,
            K::LengthExceedsInput { declared: u64::MAX }
        );
        let arr = [0x9b, 0, 0, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            Reader::new(&arr).array().unwrap_err().kind,
            K::LengthExceedsInput { declared: 1 << 32 }
        );
        assert_eq!(
            Reader::new(&arr).skip_item().unwrap_err().kind,
            K::LengthExceedsInput { declared: 1 << 32 }
        );
    }

    #[test]
    fn skip_handles_nesting_and_refuses_hostile_depth() {
        // [1, [2, h'00'], {_ "a": [_ ]}, tag(1) 5] followed by 0x07
        let item = [
            0x84, 0x01, 0x82, 0x02, 0x41, 0x00, 0xbf, 0x61, b'a', 0x9f, 0xff, 0xff, 0xc1, 0x05,
            0x07,
        ];
        let mut r = Reader::new(&item);
        r.skip_item().unwrap();
        assert_eq!(r.position(), item.len() - 1);

        let deep = vec![0x81; 100];
        assert_eq!(Reader::new(&deep).skip_item().unwrap_err().kind, K::TooDeep);
    }

    #[test]
    fn indefinite_arrays_end_at_break() {
        let bytes = [0x9f, 0x01, 0x02, 0xff];
        let mut r = Reader::new(&bytes);
        let mut a = r.array().unwrap();
        assert_eq!(r.count_items(a).unwrap(), 2);
        let mut seen = Vec::new();
        while r.has_next(&mut a).unwrap() {
            seen.push(r.uint().unwrap());
        }
        assert_eq!(seen, [1, 2]);
        assert!(r.is_empty());
    }
}
