//! A small binary format for the engine's durable records (the store's RPC tables). Records are
//! private to this crate; a record that does not parse (a damaged store, an unknown version) is
//! an error the engine reports and skips, never a panic.
//!
//! A record is a version byte, then fields: bytes, and unsigned integers. Versions 2 and 3
//! (written now) encode an integer as LEB128 (7 bits a byte, low first, at most 10 bytes), a byte
//! string as its length so encoded and the bytes; version 1 (read still, from stores written
//! before) used 8 little-endian bytes for each integer and length. Most integers in a record are
//! lengths, counts and flags of one byte: a call's record is about a quarter smaller in version
//! 2, and SQLite's work for a row (page splits, WAL bytes) shrinks with it. Version 3 is version
//! 2 but for what a record's reader makes of it: a call's record keeps a code for the timeline
//! lines it can rebuild (see `engine::client::Derived`), where version 2 kept every line's text.

use bytes::Bytes;

/// Version byte every record written now starts with.
pub(crate) const RECORD_VERSION: u8 = 3;
/// The first version with LEB128 integers, still read (call records keep timelines as text).
pub(crate) const TEXT_TIMELINE_VERSION: u8 = 2;
/// The version with fixed 8-byte integers, still read.
const FIXED_WIDTH_VERSION: u8 = 1;
/// Most bytes of a LEB128 `u64`.
const MAX_VARINT_LEN: usize = 10;

/// Appends fields to a record.
pub(crate) struct Writer(Vec<u8>, usize);

impl Writer {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        // Records of small calls are a few hundred bytes: one allocation, not a growing one.
        Self::after(Vec::with_capacity(512))
    }

    /// A record written after what `bytes` holds already (see [`Writer::finish_after`]): many
    /// records in one buffer, not one allocation each.
    pub(crate) fn after(mut bytes: Vec<u8>) -> Self {
        let start = bytes.len();
        bytes.push(RECORD_VERSION);
        Self(bytes, start)
    }

    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    pub(crate) fn u64(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
        self
    }

    pub(crate) fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }

    /// The record (of a writer made by [`Writer::new`]).
    #[cfg(test)]
    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }

    /// The buffer given to [`Writer::after`], and where in it the record is.
    pub(crate) fn finish_after(self) -> (Vec<u8>, std::ops::Range<usize>) {
        let end = self.0.len();
        (self.0, self.1..end)
    }
}

/// A record that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("damaged rpc record: {0}")]
pub struct RecordError(pub &'static str);

/// Reads fields back, in the order they were written.
pub(crate) struct Reader {
    buf: Bytes,
    pos: usize,
    /// Version 1: integers are 8 fixed bytes.
    fixed_width: bool,
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Result<Self, RecordError> {
        match buf.first() {
            Some(&RECORD_VERSION | &TEXT_TIMELINE_VERSION) => Ok(Self {
                buf,
                pos: 1,
                fixed_width: false,
            }),
            Some(&FIXED_WIDTH_VERSION) => Ok(Self {
                buf,
                pos: 1,
                fixed_width: true,
            }),
            Some(_) => Err(RecordError("unknown version")),
            None => Err(RecordError("empty")),
        }
    }

    /// The record's version byte.
    pub(crate) fn version(&self) -> u8 {
        self.buf[0]
    }

    fn take(&mut self, n: usize) -> Result<&[u8], RecordError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(RecordError("cut short"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64(&mut self) -> Result<u64, RecordError> {
        if self.fixed_width {
            let b = self.take(8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            return Ok(u64::from_le_bytes(a));
        }
        let mut value = 0u64;
        for i in 0..MAX_VARINT_LEN {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            // The tenth byte holds the top bit only; anything more does not fit a u64.
            if i == MAX_VARINT_LEN - 1 && bits > 1 {
                return Err(RecordError("integer too large"));
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError("integer too large"))
    }

    pub(crate) fn bytes(&mut self) -> Result<Bytes, RecordError> {
        let len = usize::try_from(self.u64()?).map_err(|_| RecordError("length"))?;
        let start = self.pos;
        self.take(len)?;
        Ok(self.buf.slice(start..start + len))
    }

    pub(crate) fn string(&mut self) -> Result<String, RecordError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| RecordError("text"))
    }

    pub(crate) fn end(&self) -> Result<(), RecordError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(RecordError("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_damage_is_an_error() {
        let mut w = Writer::new();
        w.u8(7).u64(1 << 40).bytes(b"abc").str("dtn://n1/");
        let rec = Bytes::from(w.finish());
        let mut r = Reader::new(rec.clone()).unwrap();
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert_eq!(&r.bytes().unwrap()[..], b"abc");
        assert_eq!(r.string().unwrap(), "dtn://n1/");
        r.end().unwrap();
        for cut in 0..rec.len() {
            let parsed = Reader::new(rec.slice(..cut)).and_then(|mut r| {
                r.u8()?;
                r.u64()?;
                r.bytes()?;
                r.string()?;
                r.end()
            });
            assert!(parsed.is_err(), "a record cut at {cut} parsed");
        }
        let mut huge = Writer::new();
        huge.u64(u64::MAX);
        assert!(
            Reader::new(Bytes::from(huge.finish()))
                .unwrap()
                .bytes()
                .is_err()
        );
    }

    #[test]
    fn integers_take_as_many_bytes_as_they_need_and_every_width_round_trips() {
        let cases: [(u64, usize); 7] = [
            (0, 1),
            (127, 1),
            (128, 2),
            (30_000, 3),
            // A DtnTime in milliseconds (2026 is ~8.5e11 ms after 2000).
            (850_000_000_000, 6),
            (u64::MAX >> 1, 9),
            (u64::MAX, 10),
        ];
        for (v, len) in cases {
            let mut w = Writer::new();
            w.u64(v);
            let rec = w.finish();
            assert_eq!(rec.len(), 1 + len, "{v}");
            let mut r = Reader::new(Bytes::from(rec)).unwrap();
            assert_eq!(r.u64().unwrap(), v);
            r.end().unwrap();
        }
        for shift in 0..64 {
            let v = (1u64 << shift) | (((1u64 << shift) - 1) / 3);
            let mut w = Writer::new();
            w.u64(v).u64(v.wrapping_mul(0x9e37_79b9));
            let mut r = Reader::new(Bytes::from(w.finish())).unwrap();
            assert_eq!(r.u64().unwrap(), v);
            assert_eq!(r.u64().unwrap(), v.wrapping_mul(0x9e37_79b9));
        }
    }

    #[test]
    fn an_integer_past_64_bits_is_an_error() {
        // Eleven continuation bytes, and ten whose last carries more than the top bit.
        let too_long = [&[RECORD_VERSION][..], &[0xff; 10], &[0x01]].concat();
        let too_wide = [&[RECORD_VERSION][..], &[0xff; 9], &[0x02]].concat();
        for rec in [too_long, too_wide] {
            let mut r = Reader::new(Bytes::from(rec)).unwrap();
            assert_eq!(r.u64(), Err(RecordError("integer too large")));
        }
    }

    #[test]
    fn a_version_1_record_with_fixed_width_integers_still_reads() {
        // What version 1's writer made of `u8(7).u64(1 << 40).bytes(b"abc")`.
        let mut rec = vec![FIXED_WIDTH_VERSION, 7];
        rec.extend_from_slice(&(1u64 << 40).to_le_bytes());
        rec.extend_from_slice(&3u64.to_le_bytes());
        rec.extend_from_slice(b"abc");
        let mut r = Reader::new(Bytes::from(rec)).unwrap();
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), 1 << 40);
        assert_eq!(&r.bytes().unwrap()[..], b"abc");
        r.end().unwrap();
        assert_eq!(
            Reader::new(Bytes::from_static(&[4])).err(),
            Some(RecordError("unknown version"))
        );
    }
}
