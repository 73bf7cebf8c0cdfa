//! Lower-case hexadecimal text of byte strings (call ids, keys, hashes), written digit pairs
//! from a table: ids are shown on every API answer about a call, where `{:02x}` per byte cost
//! more than the rest of the answer.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The lower-case hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Writes the lower-case hex digits of `bytes` (at most 64 bytes at a time on the stack), with
/// the formatter's width and alignment.
pub fn fmt_hex(f: &mut std::fmt::Formatter<'_>, bytes: &[u8]) -> std::fmt::Result {
    let mut buf = [0u8; 128];
    if bytes.len() > buf.len() / 2 {
        return f.pad(&hex(bytes));
    }
    for (i, &b) in bytes.iter().enumerate() {
        buf[2 * i] = DIGITS[usize::from(b >> 4)];
        buf[2 * i + 1] = DIGITS[usize::from(b & 0x0f)];
    }
    // Only ASCII digits were written.
    f.pad(std::str::from_utf8(&buf[..bytes.len() * 2]).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Shown<'a>(&'a [u8]);

    impl std::fmt::Display for Shown<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            fmt_hex(f, self.0)
        }
    }

    #[test]
    fn digits_match_the_formatter_s_for_every_byte_and_any_length() {
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&all), expected);
        for len in [0, 1, 16, 32, 64, 65, 256] {
            assert_eq!(Shown(&all[..len]).to_string(), expected[..2 * len]);
        }
        assert_eq!(format!("{:>6}", Shown(&[0xab])), "    ab");
    }
}
