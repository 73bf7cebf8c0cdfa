//! A small binary format for the engine's durable records (the store's RPC tables). Records are
//! private to this crate and written and read by the same version, but a record that does not
//! parse (a damaged store, an unknown version) is an error the engine reports and skips, never a
//! panic.

use bytes::Bytes;

/// Version byte every record starts with.
pub(crate) const RECORD_VERSION: u8 = 1;

/// Appends fields to a record.
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    pub(crate) fn new() -> Self {
        // Records of small calls are a few hundred bytes: one allocation, not a growing one.
        let mut bytes = Vec::with_capacity(512);
        bytes.push(RECORD_VERSION);
        Self(bytes)
    }

    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
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

    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
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
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Result<Self, RecordError> {
        match buf.first() {
            Some(&RECORD_VERSION) => Ok(Self { buf, pos: 1 }),
            Some(_) => Err(RecordError("unknown version")),
            None => Err(RecordError("empty")),
        }
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
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
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
}
