//! Administrative records (RFC 9171 §6.1): bundle status reports, and records of other types kept
//! as received.

use bytes::Bytes;

use crate::cbor::{self, Reader};
use crate::eid::Eid;
use crate::error::{DecodeError, DecodeErrorKind as K};
use crate::primary::{CreationTimestamp, DtnTime};

/// Record type code of a bundle status report.
pub const RECORD_STATUS_REPORT: u64 = 1;

/// The payload of a bundle whose "ADU is an administrative record" flag is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRecord {
    /// A bundle status report (type 1).
    StatusReport(StatusReport),
    /// A record of another type, kept as received.
    Unknown {
        /// Record type code.
        record_type: u64,
        /// The CBOR encoding of the record content.
        content: Bytes,
    },
}

/// A bundle status report (RFC 9171 §6.1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    /// "Reporting node received bundle", if asserted.
    pub received: Option<StatusAssertion>,
    /// "Reporting node forwarded the bundle", if asserted.
    pub forwarded: Option<StatusAssertion>,
    /// "Reporting node delivered the bundle", if asserted.
    pub delivered: Option<StatusAssertion>,
    /// "Reporting node deleted the bundle", if asserted.
    pub deleted: Option<StatusAssertion>,
    /// Why.
    pub reason: StatusReason,
    /// Source of the subject bundle.
    pub source: Eid,
    /// Creation timestamp of the subject bundle.
    pub creation: CreationTimestamp,
    /// If the subject bundle is a fragment: (fragment offset, payload length).
    pub fragment: Option<(u64, u64)>,
}

/// An asserted status, with the time it was asserted if the subject bundle asked for status times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusAssertion {
    /// When the status was asserted.
    pub time: Option<DtnTime>,
}

/// Status report reason codes (RFC 9171 §6.1.1, Table 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum StatusReason {
    /// 0: no additional information.
    NoInformation,
    /// 1: lifetime expired.
    LifetimeExpired,
    /// 2: forwarded over unidirectional link.
    ForwardedOverUnidirectionalLink,
    /// 3: transmission canceled.
    TransmissionCanceled,
    /// 4: depleted storage.
    DepletedStorage,
    /// 5: destination endpoint id unavailable.
    DestinationUnavailable,
    /// 6: no known route to destination from here.
    NoKnownRoute,
    /// 7: no timely contact with next node on route.
    NoTimelyContact,
    /// 8: block unintelligible.
    BlockUnintelligible,
    /// 9: hop limit exceeded.
    HopLimitExceeded,
    /// 10: traffic pared (e.g., status reports).
    TrafficPared,
    /// 11: block unsupported.
    BlockUnsupported,
    /// A code this crate does not name (e.g. one defined by BPSec), kept as is.
    Other(u64),
}

impl StatusReason {
    /// The code on the wire.
    pub fn code(self) -> u64 {
        match self {
            StatusReason::NoInformation => 0,
            StatusReason::LifetimeExpired => 1,
            StatusReason::ForwardedOverUnidirectionalLink => 2,
            StatusReason::TransmissionCanceled => 3,
            StatusReason::DepletedStorage => 4,
            StatusReason::DestinationUnavailable => 5,
            StatusReason::NoKnownRoute => 6,
            StatusReason::NoTimelyContact => 7,
            StatusReason::BlockUnintelligible => 8,
            StatusReason::HopLimitExceeded => 9,
            StatusReason::TrafficPared => 10,
            StatusReason::BlockUnsupported => 11,
            StatusReason::Other(code) => code,
        }
    }

    /// The reason for a code.
    pub fn from_code(code: u64) -> Self {
        match code {
            0 => StatusReason::NoInformation,
            1 => StatusReason::LifetimeExpired,
            2 => StatusReason::ForwardedOverUnidirectionalLink,
            3 => StatusReason::TransmissionCanceled,
            4 => StatusReason::DepletedStorage,
            5 => StatusReason::DestinationUnavailable,
            6 => StatusReason::NoKnownRoute,
            7 => StatusReason::NoTimelyContact,
            8 => StatusReason::BlockUnintelligible,
            9 => StatusReason::HopLimitExceeded,
            10 => StatusReason::TrafficPared,
            11 => StatusReason::BlockUnsupported,
            other => StatusReason::Other(other),
        }
    }
}

impl AdminRecord {
    /// Decodes an administrative record that fills `payload` exactly.
    pub fn decode(payload: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let mut a = r.array()?;
        let n = r.count_items(a)?;
        if n != 2 {
            return Err(DecodeError::new(
                0,
                K::BadArrayLength {
                    what: "administrative record",
                    len: n,
                },
            ));
        }
        r.expect_next(&mut a, "administrative record")?;
        let record_type = r.uint()?;
        r.expect_next(&mut a, "administrative record")?;
        let record = if record_type == RECORD_STATUS_REPORT {
            AdminRecord::StatusReport(StatusReport::decode(&mut r, payload)?)
        } else {
            let start = r.position();
            r.skip_item()?;
            AdminRecord::Unknown {
                record_type,
                content: payload.slice(start..r.position()),
            }
        };
        r.expect_end(&mut a, "administrative record")?;
        if !r.is_empty() {
            return Err(r.err(K::TrailingBytes));
        }
        Ok(record)
    }

    /// Encodes the record (a bundle payload).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(64);
        cbor::put_array(&mut out, 2);
        match self {
            AdminRecord::StatusReport(report) => {
                cbor::put_uint(&mut out, RECORD_STATUS_REPORT);
                report.encode(&mut out);
            }
            AdminRecord::Unknown {
                record_type,
                content,
            } => {
                cbor::put_uint(&mut out, *record_type);
                out.extend_from_slice(content);
            }
        }
        Bytes::from(out)
    }
}

impl StatusReport {
    fn assertions(&self) -> [Option<StatusAssertion>; 4] {
        [self.received, self.forwarded, self.delivered, self.deleted]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        cbor::put_array(out, if self.fragment.is_some() { 6 } else { 4 });
        cbor::put_array(out, 4);
        for item in self.assertions() {
            match item {
                None => {
                    cbor::put_array(out, 1);
                    cbor::put_bool(out, false);
                }
                Some(StatusAssertion { time: None }) => {
                    cbor::put_array(out, 1);
                    cbor::put_bool(out, true);
                }
                Some(StatusAssertion { time: Some(t) }) => {
                    cbor::put_array(out, 2);
                    cbor::put_bool(out, true);
                    cbor::put_uint(out, t.as_millis());
                }
            }
        }
        cbor::put_uint(out, self.reason.code());
        self.source.encode(out);
        self.creation.encode(out);
        if let Some((offset, len)) = self.fragment {
            cbor::put_uint(out, offset);
            cbor::put_uint(out, len);
        }
    }

    fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<Self, DecodeError> {
        const WHAT: &str = "status report";
        let start = r.position();
        let mut a = r.array()?;
        let n = r.count_items(a)?;
        if n != 4 && n != 6 {
            return Err(DecodeError::new(
                start,
                K::BadArrayLength { what: WHAT, len: n },
            ));
        }
        r.expect_next(&mut a, WHAT)?;
        let info_at = r.position();
        let mut info = r.array()?;
        let mut items = [None; 4];
        let mut count = 0;
        while r.has_next(&mut info)? {
            let item = decode_status_item(r)?;
            // Elements past the fourth are defined by future specifications; step over them.
            if let Some(slot) = items.get_mut(count) {
                *slot = item;
            }
            count += 1;
        }
        if count < 4 {
            return Err(DecodeError::new(
                info_at,
                K::BadArrayLength {
                    what: "bundle status information",
                    len: count as u64,
                },
            ));
        }
        r.expect_next(&mut a, WHAT)?;
        let reason = StatusReason::from_code(r.uint()?);
        r.expect_next(&mut a, WHAT)?;
        let source = Eid::decode(r, buf)?;
        r.expect_next(&mut a, WHAT)?;
        let creation = CreationTimestamp::decode(r)?;
        let fragment = if n == 6 {
            r.expect_next(&mut a, WHAT)?;
            let offset = r.uint()?;
            r.expect_next(&mut a, WHAT)?;
            let len = r.uint()?;
            Some((offset, len))
        } else {
            None
        };
        r.expect_end(&mut a, WHAT)?;
        let [received, forwarded, delivered, deleted] = items;
        Ok(Self {
            received,
            forwarded,
            delivered,
            deleted,
            reason,
            source,
            creation,
            fragment,
        })
    }
}

/// One bundle status item: `[false]`, `[true]` or `[true, time]`.
fn decode_status_item(r: &mut Reader<'_>) -> Result<Option<StatusAssertion>, DecodeError> {
    let at = r.position();
    let mut item = r.array()?;
    r.expect_next(&mut item, "status item")?;
    let asserted = r.bool()?;
    let time = if r.has_next(&mut item)? {
        if !asserted {
            return Err(DecodeError::new(
                at,
                K::InvalidAdminRecord("a time for a status that is not asserted"),
            ));
        }
        Some(DtnTime::from_millis(r.uint()?))
    } else {
        None
    };
    r.expect_end(&mut item, "status item")?;
    Ok(asserted.then_some(StatusAssertion { time }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered_report() -> AdminRecord {
        AdminRecord::StatusReport(StatusReport {
            received: None,
            forwarded: None,
            delivered: Some(StatusAssertion {
                time: Some(DtnTime::from_millis(1000)),
            }),
            deleted: None,
            reason: StatusReason::NoInformation,
            source: Eid::ipn(5, 1),
            creation: CreationTimestamp {
                time: DtnTime::from_millis(42),
                sequence: 7,
            },
            fragment: None,
        })
    }

    #[test]
    fn status_report_layout_follows_rfc_9171_section_6_1_1() {
        // [1, [[[false], [false], [true, 1000], [false]], 0, [2, [5, 1]], [42, 7]]]
        let expected = [
            0x82, 0x01, 0x84, 0x84, 0x81, 0xf4, 0x81, 0xf4, 0x82, 0xf5, 0x19, 0x03, 0xe8, 0x81,
            0xf4, 0x00, 0x82, 0x02, 0x82, 0x05, 0x01, 0x82, 0x18, 0x2a, 0x07,
        ];
        assert_eq!(&delivered_report().encode()[..], &expected);
        assert_eq!(
            AdminRecord::decode(&Bytes::copy_from_slice(&expected)).unwrap(),
            delivered_report()
        );
    }

    #[test]
    fn extra_status_information_elements_are_skipped() {
        // A fifth status item (a future specification's) between the four and the reason code.
        let bytes = [
            0x82, 0x01, 0x84, 0x85, 0x81, 0xf4, 0x81, 0xf4, 0x82, 0xf5, 0x19, 0x03, 0xe8, 0x81,
            0xf4, 0x81, 0xf5, 0x00, 0x82, 0x02, 0x82, 0x05, 0x01, 0x82, 0x18, 0x2a, 0x07,
        ];
        assert_eq!(
            AdminRecord::decode(&Bytes::copy_from_slice(&bytes)).unwrap(),
            delivered_report()
        );
    }

    #[test]
    fn reason_codes_are_those_of_table_1() {
        for code in 0..=11 {
            let reason = StatusReason::from_code(code);
            assert!(
                !matches!(reason, StatusReason::Other(_)),
                "code {code} is named by the RFC"
            );
            assert_eq!(reason.code(), code);
        }
        assert_eq!(StatusReason::from_code(9), StatusReason::HopLimitExceeded);
        assert_eq!(StatusReason::from_code(200), StatusReason::Other(200));
    }

    #[test]
    fn malformed_reports_are_refused() {
        let decode =
            |b: &'static [u8]| AdminRecord::decode(&Bytes::from_static(b)).map_err(|e| e.kind);
        // A time on a status that is not asserted.
        assert!(matches!(
            decode(&[
                0x82, 0x01, 0x84, 0x84, 0x82, 0xf4, 0x01, 0x81, 0xf4, 0x81, 0xf4, 0x81, 0xf4, 0x00,
                0x82, 0x01, 0x00, 0x82, 0x00, 0x00
            ]),
            Err(K::InvalidAdminRecord(_))
        ));
        // Only three status items.
        assert!(matches!(
            decode(&[
                0x82, 0x01, 0x84, 0x83, 0x81, 0xf4, 0x81, 0xf4, 0x81, 0xf4, 0x00, 0x82, 0x01, 0x00,
                0x82, 0x00, 0x00
            ]),
            Err(K::BadArrayLength { .. })
        ));
        // Five elements in the report.
        assert!(matches!(
            decode(&[
                0x82, 0x01, 0x85, 0x84, 0x81, 0xf4, 0x81, 0xf4, 0x81, 0xf4, 0x81, 0xf4, 0x00, 0x82,
                0x01, 0x00, 0x82, 0x00, 0x00, 0x00
            ]),
            Err(K::BadArrayLength { .. })
        ));
        // A record that is not a pair, and trailing bytes.
        assert!(matches!(
            decode(&[0x81, 0x01]),
            Err(K::BadArrayLength { .. })
        ));
        assert_eq!(decode(&[0x82, 0x02, 0x00, 0x00]), Err(K::TrailingBytes));
    }
}
