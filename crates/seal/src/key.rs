//! [`PublicKey`]: a node's name to its peers, and its text form.

use curve25519_dalek::edwards::CompressedEdwardsY;
use ed25519_dalek::VerifyingKey;

/// A node's public key: an Ed25519 verifying key (RFC 8032 encoding). Shown as 64 lowercase hex
/// digits.
///
/// The bytes are public so that a key can be stored and compared without checks, which means a
/// value may hold bytes that are no usable key; [`PublicKey::is_valid`] says whether it is, and
/// parsing one from text ([`str::parse`]) checks it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; 32]);

/// The order of the bytes (as the derived one), compared as two big-endian 128-bit numbers: keys
/// lead the engine's map keys, and a `memcmp` call per comparison cost more than the rest.
impl Ord for PublicKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let halves = |k: &PublicKey| {
            let (high, low) = k.0.split_at(16);
            let number = |half: &[u8]| u128::from_be_bytes(half.try_into().unwrap_or_default());
            (number(high), number(low))
        };
        halves(self).cmp(&halves(other))
    }
}

impl PartialOrd for PublicKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PublicKey {
    /// Length of a public key in bytes.
    pub const LEN: usize = 32;

    /// Whether these bytes are a usable Ed25519 public key: the canonical encoding of a curve
    /// point that is not of small order. Only such keys sign envelopes that [`crate::verify`]
    /// accepts, and only such keys can be sealed to.
    pub fn is_valid(&self) -> bool {
        self.verifying_key().is_some()
    }

    /// The key as ed25519-dalek uses it, if it is valid (see [`PublicKey::is_valid`]).
    pub(crate) fn verifying_key(&self) -> Option<VerifyingKey> {
        let point = CompressedEdwardsY(self.0).decompress()?;
        // A non-canonical encoding would let one key go by two names; a small-order point is no
        // key at all (it "verifies" forged signatures, and X25519 with it yields no secret).
        if point.is_small_order() || point.compress().0 != self.0 {
            return None;
        }
        Some(VerifyingKey::from(point))
    }
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // From a table into one buffer: a key is shown on every API answer about a reply, where
        // `{:02x}` per byte cost more than the rest of the answer.
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            text[2 * i] = DIGITS[usize::from(b >> 4)];
            text[2 * i + 1] = DIGITS[usize::from(b & 0x0f)];
        }
        f.pad(std::str::from_utf8(&text).unwrap_or_default())
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// Why a text is not a public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseKeyError {
    /// Not 64 characters long.
    #[error("a public key is 64 hex digits, this has {0} characters")]
    Length(usize),
    /// A character that is not a hex digit, at this (0-based) character position.
    #[error("a public key is 64 hex digits, character {0} is not one")]
    Digit(usize),
    /// 64 hex digits, but not a valid Ed25519 public key (see [`PublicKey::is_valid`]).
    #[error("not a valid Ed25519 public key")]
    Invalid,
}

impl std::str::FromStr for PublicKey {
    type Err = ParseKeyError;

    /// Reads 64 hex digits (either case), and refuses bytes that are no valid key.
    fn from_str(s: &str) -> Result<Self, ParseKeyError> {
        let count = s.chars().count();
        if count != 2 * Self::LEN {
            return Err(ParseKeyError::Length(count));
        }
        let mut bytes = [0u8; 32];
        for (i, c) in s.chars().enumerate() {
            let digit = c.to_digit(16).ok_or(ParseKeyError::Digit(i))?;
            // i < 64 and digit < 16, so both casts are exact.
            bytes[i / 2] |= (digit as u8) << if i % 2 == 0 { 4 } else { 0 };
        }
        let key = PublicKey(bytes);
        if !key.is_valid() {
            return Err(ParseKeyError::Invalid);
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        #[test]
        fn keys_order_as_their_bytes(a in proptest::prelude::any::<[u8; 32]>(), b in proptest::prelude::any::<[u8; 32]>(), at in 0usize..32) {
            // Also keys equal up to a byte, where the order is decided late.
            let mut c = a;
            c[at] = b[at];
            for (x, y) in [(a, b), (a, c), (c, a), (a, a)] {
                proptest::prop_assert_eq!(PublicKey(x).cmp(&PublicKey(y)), x.cmp(&y));
            }
        }
    }

    use super::*;

    const RFC8032_1: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

    #[test]
    fn parses_and_shows_hex() {
        let key: PublicKey = RFC8032_1.parse().unwrap();
        assert_eq!(key.to_string(), RFC8032_1);
        assert_eq!(format!("{key:?}"), format!("PublicKey({RFC8032_1})"));
        let upper: PublicKey = RFC8032_1.to_uppercase().parse().unwrap();
        assert_eq!(upper, key);
    }

    #[test]
    fn refuses_wrong_length_and_non_hex() {
        assert_eq!("".parse::<PublicKey>(), Err(ParseKeyError::Length(0)));
        assert_eq!(
            RFC8032_1[..62].parse::<PublicKey>(),
            Err(ParseKeyError::Length(62))
        );
        assert_eq!(
            format!("{RFC8032_1}0").parse::<PublicKey>(),
            Err(ParseKeyError::Length(65))
        );
        let mut bad = RFC8032_1.to_owned();
        bad.replace_range(5..6, "g");
        assert_eq!(bad.parse::<PublicKey>(), Err(ParseKeyError::Digit(5)));
        // Lengths and positions count characters, not bytes.
        let multibyte = format!("é{}", &RFC8032_1[2..]);
        assert_eq!(multibyte.len(), 64);
        assert_eq!(
            multibyte.parse::<PublicKey>(),
            Err(ParseKeyError::Length(63))
        );
        let multibyte = format!("{}é{}", &RFC8032_1[..10], &RFC8032_1[11..]);
        assert_eq!(
            multibyte.parse::<PublicKey>(),
            Err(ParseKeyError::Digit(10))
        );
        assert_eq!(
            format!(" {}", &RFC8032_1[1..]).parse::<PublicKey>(),
            Err(ParseKeyError::Digit(0))
        );
    }

    #[test]
    fn refuses_small_order_and_off_curve_points() {
        // The identity point (y = 1) is of small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(!PublicKey(identity).is_valid());
        assert_eq!(
            "0100000000000000000000000000000000000000000000000000000000000000".parse::<PublicKey>(),
            Err(ParseKeyError::Invalid)
        );
        // All zeros: y = 0 is a point of order 4.
        assert!(!PublicKey([0; 32]).is_valid());
        // y = p + 1 (non-canonical encoding of the identity's y) and y = 2^255 - 1.
        let mut y_p_plus_1 = [0xff; 32];
        y_p_plus_1[0] = 0xee;
        y_p_plus_1[31] = 0x7f;
        assert!(!PublicKey(y_p_plus_1).is_valid());
        let mut top = [0xff; 32];
        top[31] = 0x7f;
        assert!(!PublicKey(top).is_valid());
        // A y with no x on the curve: 2 is not a valid y coordinate.
        let mut two = [0u8; 32];
        two[0] = 2;
        assert!(!PublicKey(two).is_valid());
        let key: PublicKey = RFC8032_1.parse().unwrap();
        assert!(key.is_valid());
    }

    /// y + p for a small y is a second encoding of the point with that y: decompression
    /// accepts it, `is_valid` does not, so a key has one name.
    #[test]
    fn refuses_non_canonical_encodings_of_good_points() {
        let mut refused = 0;
        for y in 0..19u8 {
            let mut bytes = [0xff; 32];
            bytes[0] = 0xed + y; // p = 2^255 - 19 ends in 0xed
            bytes[31] = 0x7f;
            for sign in [0, 0x80] {
                let mut bytes = bytes;
                bytes[31] |= sign;
                let Some(point) = CompressedEdwardsY(bytes).decompress() else {
                    continue;
                };
                if point.is_small_order() {
                    continue;
                }
                assert!(!PublicKey(bytes).is_valid());
                assert!(PublicKey(point.compress().0).is_valid());
                refused += 1;
            }
        }
        assert!(refused > 0, "no large-order point with y < 19 found");
    }
}
