//! Block CRCs (RFC 9171 §4.2.1–4.2.2): none, X.25 CRC-16, and CRC-32C (Castagnoli, computed with
//! the CPU's CRC32 instructions where it has them, through the `crc32c` crate).

use crate::error::DecodeErrorKind;

/// Which CRC protects a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum CrcType {
    /// No CRC (type code 0).
    None,
    /// The X.25 CRC-16 (type code 1).
    Crc16,
    /// CRC-32C (type code 2).
    #[default]
    Crc32c,
}

const X25: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_IBM_SDLC);

impl CrcType {
    /// The type code carried in blocks.
    pub fn code(self) -> u64 {
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => 1,
            CrcType::Crc32c => 2,
        }
    }

    /// The CRC type for a type code.
    pub fn from_code(code: u64) -> Result<Self, DecodeErrorKind> {
        match code {
            0 => Ok(CrcType::None),
            1 => Ok(CrcType::Crc16),
            2 => Ok(CrcType::Crc32c),
            other => Err(DecodeErrorKind::UnknownCrcType(other)),
        }
    }

    /// Length in bytes of the CRC value (0 for none).
    pub fn value_len(self) -> usize {
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => 2,
            CrcType::Crc32c => 4,
        }
    }

    /// A running CRC of this type.
    pub(crate) fn digest(self) -> CrcDigest {
        match self {
            CrcType::None => CrcDigest::None,
            CrcType::Crc16 => CrcDigest::Crc16(X25.digest()),
            CrcType::Crc32c => CrcDigest::Crc32c(0),
        }
    }
}

/// A CRC computed over a block in pieces, so that a payload held elsewhere need not be copied next
/// to its header to be checked.
pub(crate) enum CrcDigest {
    None,
    Crc16(crc::Digest<'static, u16, crc::Table<16>>),
    Crc32c(u32),
}

impl CrcDigest {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match self {
            CrcDigest::None => {}
            CrcDigest::Crc16(d) => d.update(bytes),
            CrcDigest::Crc32c(c) => *c = crc32c::crc32c_append(*c, bytes),
        }
    }

    /// Feeds the zeroed CRC field that the RFC says to use in place of the CRC value.
    pub(crate) fn update_zeroed_value(&mut self) {
        match self {
            CrcDigest::None => {}
            CrcDigest::Crc16(d) => d.update(&[0; 2]),
            CrcDigest::Crc32c(c) => *c = crc32c_append_small(*c, &[0; 4]),
        }
    }

    /// Feeds the zeroed CRC value followed by the block's remaining bytes (none, or the break of
    /// an indefinite-length block) in one update when they are few, since each update has a
    /// fixed cost that matters for small bundles.
    pub(crate) fn update_zeroed_value_then(&mut self, tail: &[u8]) {
        let mut joined = [0u8; 8];
        let n = match self {
            CrcDigest::None => return,
            CrcDigest::Crc16(_) => 2,
            CrcDigest::Crc32c(_) => 4,
        };
        if let Some(dst) = joined.get_mut(n..n + tail.len()) {
            dst.copy_from_slice(tail);
            match self {
                CrcDigest::Crc32c(c) => *c = crc32c_append_small(*c, &joined[..n + tail.len()]),
                _ => self.update(&joined[..n + tail.len()]),
            }
        } else {
            self.update_zeroed_value();
            self.update(tail);
        }
    }

    /// The finished CRC, widened to 32 bits.
    pub(crate) fn finish(self) -> u32 {
        match self {
            CrcDigest::None => 0,
            CrcDigest::Crc16(d) => u32::from(d.finalize()),
            CrcDigest::Crc32c(c) => c,
        }
    }
}

/// CRC-32C (reflected polynomial 0x82F63B78) byte table, for the few bytes (the zeroed CRC value,
/// a break) where a call into the hardware routine costs more than the lookups.
const CRC32C_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `crc32c::crc32c_append` for a handful of bytes, by table.
#[inline]
fn crc32c_append_small(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c = CRC32C_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// Reads a big-endian CRC value of 2 or 4 bytes.
pub(crate) fn value_from_be(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
}

/// Writes a CRC value in network byte order with the width of its type.
pub(crate) fn value_to_be(crc_type: CrcType, value: u32) -> ([u8; 4], usize) {
    let be = value.to_be_bytes();
    match crc_type {
        CrcType::None => ([0; 4], 0),
        CrcType::Crc16 => ([be[2], be[3], 0, 0], 2),
        CrcType::Crc32c => (be, 4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc_of(t: CrcType, bytes: &[u8]) -> u32 {
        let mut d = t.digest();
        d.update(bytes);
        d.finish()
    }

    #[test]
    fn x25_check_value() {
        // The catalogue check value of CRC-16/X-25 (alias IBM-SDLC) over "123456789".
        assert_eq!(crc_of(CrcType::Crc16, b"123456789"), 0x906e);
    }

    #[test]
    fn crc32c_examples_of_rfc_7143_appendix_a4() {
        // RFC 7143 A.4, to which RFC 9171 §4.2.1 points for CRC-32C examples. The RFC lists the
        // CRC bytes as they appear on the wire in iSCSI (little-endian), so the values are
        // byte-swapped here.
        assert_eq!(
            crc_of(CrcType::Crc32c, &[0u8; 32]),
            u32::from_le_bytes([0xaa, 0x36, 0x91, 0x8a])
        );
        assert_eq!(
            crc_of(CrcType::Crc32c, &[0xffu8; 32]),
            u32::from_le_bytes([0x43, 0xab, 0xa8, 0x62])
        );
        let incrementing: Vec<u8> = (0..32).collect();
        assert_eq!(
            crc_of(CrcType::Crc32c, &incrementing),
            u32::from_le_bytes([0x4e, 0x79, 0xdd, 0x46])
        );
        let decrementing: Vec<u8> = (0..32).rev().collect();
        assert_eq!(
            crc_of(CrcType::Crc32c, &decrementing),
            u32::from_le_bytes([0x5c, 0xdb, 0x3f, 0x11])
        );
    }

    #[test]
    fn piecewise_equals_whole() {
        let data: Vec<u8> = (0..=255).cycle().take(3000).collect();
        for t in [CrcType::Crc16, CrcType::Crc32c] {
            let mut d = t.digest();
            for chunk in data.chunks(7) {
                d.update(chunk);
            }
            assert_eq!(d.finish(), crc_of(t, &data));
        }
    }
}

#[cfg(test)]
mod exp_tests {
    #[test]
    fn small_matches_hw() {
        for n in 0..12 {
            let d: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            for init in [0u32, 1, 0xdead_beef] {
                assert_eq!(
                    super::crc32c_append_small(init, &d),
                    crc32c::crc32c_append(init, &d)
                );
            }
        }
    }
}
