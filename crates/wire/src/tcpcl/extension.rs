//! Extension items (RFC 9174 §4.8 and §5.2.5): the same item format carries session extensions in
//! SESS_INIT and transfer extensions in the first XFER_SEGMENT of a transfer.

use bytes::{BufMut, Bytes, BytesMut};

use super::cursor::Cursor;
use super::error::TcpclError;

/// Bytes of an item's header: flags (1), type (2), value length (2).
pub(super) const ITEM_HEADER_LEN: usize = 5;

/// One session or transfer extension item.
///
/// Items of types this crate does not interpret are kept as received (type, criticality, raw
/// value), so the session layer can refuse a transfer or session whose critical item it does not
/// support. Reserved flag bits other than CRITICAL are ignored on receipt and not kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtensionItem {
    /// The CRITICAL flag: the receiver must refuse (the transfer, or the session) if it does not
    /// support the item.
    pub critical: bool,
    /// Item type code.
    pub item_type: u16,
    /// The item's value; after decoding, a slice of the received frame.
    pub value: Bytes,
}

impl ExtensionItem {
    /// The CRITICAL bit of the item flags.
    pub const FLAG_CRITICAL: u8 = 0x01;
    /// Transfer extension type 0x0001, Transfer Length: the total length of the transfer's data
    /// as an 8-byte big-endian integer.
    pub const TRANSFER_LENGTH: u16 = 0x0001;

    /// A non-critical Transfer Length item announcing `total` bytes of transfer data.
    ///
    /// Non-critical because a receiver that ignores it loses nothing but an early refusal; set
    /// `critical` on the result to insist.
    pub fn transfer_length(total: u64) -> Self {
        Self {
            critical: false,
            item_type: Self::TRANSFER_LENGTH,
            value: Bytes::copy_from_slice(&total.to_be_bytes()),
        }
    }

    /// The announced length, if this is a Transfer Length item; an error if it is one whose value
    /// is not exactly 8 bytes.
    pub fn as_transfer_length(&self) -> Option<Result<u64, TcpclError>> {
        if self.item_type != Self::TRANSFER_LENGTH {
            return None;
        }
        Some(
            <[u8; 8]>::try_from(&self.value[..])
                .map(u64::from_be_bytes)
                .map_err(|_| TcpclError::InvalidTransferLength(self.value.len())),
        )
    }

    /// Encoded size of this item.
    pub fn encoded_len(&self) -> usize {
        ITEM_HEADER_LEN.saturating_add(self.value.len())
    }
}

/// The first Transfer Length among `items`, if any. Later duplicates are ignored, as a receiver
/// that acted on the first one has already decided.
pub(super) fn transfer_length(items: &[ExtensionItem]) -> Result<Option<u64>, TcpclError> {
    items
        .iter()
        .find_map(ExtensionItem::as_transfer_length)
        .transpose()
}

/// The encoded size of `items`, checked against the field sizes that will carry it: each value
/// length is a u16, the total a u32.
pub(super) fn items_len(items: &[ExtensionItem], what: &'static str) -> Result<u32, TcpclError> {
    let mut total: usize = 0;
    for item in items {
        if u16::try_from(item.value.len()).is_err() {
            return Err(TcpclError::Unencodable {
                what: "extension item value",
                len: item.value.len(),
                max: u16::MAX.into(),
            });
        }
        total = total.saturating_add(item.encoded_len());
    }
    u32::try_from(total).map_err(|_| TcpclError::Unencodable {
        what,
        len: total,
        max: u32::MAX.into(),
    })
}

/// The encoded size of `items` without the checks of [`items_len`], saturating, for
/// `encoded_len` methods that cannot fail.
pub(super) fn items_len_unchecked(items: &[ExtensionItem]) -> usize {
    items
        .iter()
        .fold(0usize, |n, i| n.saturating_add(i.encoded_len()))
}

/// Appends `items`. The caller has checked them with [`items_len`], so the casts are lossless.
pub(super) fn put_items(out: &mut BytesMut, items: &[ExtensionItem]) {
    for item in items {
        out.put_u8(if item.critical {
            ExtensionItem::FLAG_CRITICAL
        } else {
            0
        });
        out.put_u16(item.item_type);
        out.put_u16(item.value.len() as u16);
        out.put_slice(&item.value);
    }
}

/// Decodes the items that fill `region` exactly (an extension items field, already cut to its
/// declared length). Values are slices of `region`, hence of the received frame.
pub(super) fn decode_items(region: &Bytes) -> Result<Vec<ExtensionItem>, TcpclError> {
    let mut r = Cursor::new(region);
    // Grown one item at a time: every item consumed at least 5 bytes of input, so the vector is
    // bounded by the input, never by a declared count.
    let mut items = Vec::new();
    while r.remaining() > 0 {
        if r.remaining() < ITEM_HEADER_LEN {
            return Err(TcpclError::ExtensionItemTruncated {
                available: r.remaining(),
            });
        }
        let flags = r.u8("extension item flags")?;
        let item_type = r.u16("extension item type")?;
        let declared = r.u16("extension item length")?;
        let available = r.remaining();
        if usize::from(declared) > available {
            return Err(TcpclError::ExtensionItemOverrun {
                item_type,
                declared,
                available,
            });
        }
        let value = r.bytes(declared.into(), "extension item value")?;
        items.push(ExtensionItem {
            critical: flags & ExtensionItem::FLAG_CRITICAL != 0,
            item_type,
            value,
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_layout() {
        let items = vec![
            ExtensionItem::transfer_length(0x0102),
            ExtensionItem {
                critical: true,
                item_type: 0xabcd,
                value: Bytes::from_static(b"xy"),
            },
        ];
        assert_eq!(items_len(&items, "items"), Ok(13 + 7));
        let mut out = BytesMut::new();
        put_items(&mut out, &items);
        assert_eq!(
            &out[..],
            &[
                0x00, 0x00, 0x01, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x01, 0x02, // transfer length
                0x01, 0xab, 0xcd, 0x00, 0x02, b'x', b'y', // critical, unknown type
            ]
        );
        assert_eq!(decode_items(&out.freeze()), Ok(items));
    }

    #[test]
    fn reserved_item_flags_are_ignored() {
        let region = Bytes::from_static(&[0xfe, 0x00, 0x07, 0x00, 0x00]);
        let items = decode_items(&region).unwrap();
        assert_eq!(items.len(), 1);
        assert!(!items[0].critical);
        assert_eq!(items[0].item_type, 7);
    }

    #[test]
    fn item_header_cut_short() {
        let region = Bytes::from_static(&[0x00, 0x00, 0x07, 0x00, 0x00, 0x01, 0x00]);
        assert_eq!(
            decode_items(&region),
            Err(TcpclError::ExtensionItemTruncated { available: 2 })
        );
    }

    #[test]
    fn item_value_overruns_the_items() {
        let region = Bytes::from_static(&[0x01, 0x00, 0x09, 0xff, 0xff, b'a']);
        assert_eq!(
            decode_items(&region),
            Err(TcpclError::ExtensionItemOverrun {
                item_type: 9,
                declared: 0xffff,
                available: 1,
            })
        );
    }

    #[test]
    fn transfer_length_lookup() {
        assert_eq!(transfer_length(&[]), Ok(None));
        let other = ExtensionItem {
            critical: false,
            item_type: 2,
            value: Bytes::new(),
        };
        let items = [
            other.clone(),
            ExtensionItem::transfer_length(42),
            ExtensionItem::transfer_length(7),
        ];
        assert_eq!(transfer_length(&items), Ok(Some(42)));
        assert_eq!(other.as_transfer_length(), None);
        let bad = ExtensionItem {
            critical: true,
            item_type: ExtensionItem::TRANSFER_LENGTH,
            value: Bytes::from_static(&[1, 2, 3]),
        };
        assert_eq!(
            transfer_length(&[bad]),
            Err(TcpclError::InvalidTransferLength(3))
        );
    }

    #[test]
    fn oversized_values_are_not_encodable() {
        let big = ExtensionItem {
            critical: false,
            item_type: 1,
            value: Bytes::from(vec![0; 65_536]),
        };
        assert_eq!(
            items_len(&[big], "items"),
            Err(TcpclError::Unencodable {
                what: "extension item value",
                len: 65_536,
                max: 65_535,
            })
        );
    }
}
