//! `ferry bundle …`: create a bundle file from a payload, and inspect a bundle file.

use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wire::DtnTime;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Subcommand, ValueEnum};
use wire::{
    AdminRecord, Bundle, BundleFlags, CrcType, CreationTimestamp, DTN_EPOCH_UNIX_SECS, Eid,
    ExtensionBlock, ExtensionData, HopCount, PrimaryBlock,
};

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum BundleCommand {
    /// Write a new bundle carrying a payload to a file (or stdout).
    Create {
        /// Destination endpoint id, e.g. dtn://drone/camera or ipn:2.1.
        #[arg(long)]
        to: Eid,
        /// Source node's endpoint id; dtn:none sends anonymously.
        #[arg(long)]
        from: Eid,
        /// Where status reports go (default: the source).
        #[arg(long)]
        report_to: Option<Eid>,
        /// Payload as text.
        #[arg(long, conflicts_with = "payload_file")]
        payload: Option<String>,
        /// Payload from a file ("-" for stdin).
        #[arg(long)]
        payload_file: Option<PathBuf>,
        /// How long the bundle lives, e.g. 90s, 2h, 3days.
        #[arg(long, default_value = "1h", value_parser = crate::positive_duration)]
        lifetime: Duration,
        /// CRC on every block.
        #[arg(long, value_enum, default_value_t = Crc::Crc32c)]
        crc: Crc,
        /// Add a hop count block with this limit (1–255).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=255))]
        hop_limit: Option<u64>,
        /// Creation sequence number.
        #[arg(long, default_value_t = 0)]
        sequence: u64,
        /// Output file (default: stdout, unless it is a terminal: a bundle is binary).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Decode a bundle file ("-" for stdin), check it, and print its blocks.
    Inspect {
        /// The bundle file.
        file: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Crc {
    None,
    Crc16,
    Crc32c,
}

impl From<Crc> for CrcType {
    fn from(c: Crc) -> Self {
        match c {
            Crc::None => CrcType::None,
            Crc::Crc16 => CrcType::Crc16,
            Crc::Crc32c => CrcType::Crc32c,
        }
    }
}

pub(crate) fn run(cmd: BundleCommand) -> Result<()> {
    match cmd {
        BundleCommand::Create {
            to,
            from,
            report_to,
            payload,
            payload_file,
            lifetime,
            crc,
            hop_limit,
            sequence,
            output,
        } => {
            if output.is_none() && io::stdout().is_terminal() {
                return Err(crate::exit::usage(
                    "a bundle is binary and stdout is a terminal: give -o FILE, or redirect \
                     stdout (> hello.bundle)",
                ));
            }
            let payload = match (payload, payload_file) {
                (Some(text), None) => Bytes::from(text.into_bytes()),
                (None, Some(path)) => read_input(&path)?,
                (None, None) => {
                    bail!("give the payload with --payload TEXT or --payload-file FILE")
                }
                (Some(_), Some(_)) => unreachable!("clap refuses both"),
            };
            let lifetime_ms = u64::try_from(lifetime.as_millis()).context("lifetime too long")?;
            let mut primary = PrimaryBlock::new(
                to,
                from,
                CreationTimestamp {
                    time: dtn_now()?,
                    sequence,
                },
                lifetime_ms,
            );
            primary.crc_type = crc.into();
            if let Some(r) = report_to {
                primary.report_to = r;
            }
            if primary.source.is_null() {
                // RFC 9171 §4.2.3: an anonymous bundle must not be fragmented.
                primary.flags = primary.flags.with(BundleFlags::MUST_NOT_FRAGMENT, true);
            }
            let mut bundle = Bundle::new(primary, payload);
            bundle.payload.crc_type = crc.into();
            if let Some(limit) = hop_limit {
                let mut block =
                    ExtensionBlock::new(2, ExtensionData::HopCount(HopCount { limit, count: 0 }));
                block.crc_type = crc.into();
                bundle.extensions.push(block);
            }
            bundle
                .validate()
                .map_err(|k| anyhow::anyhow!("the bundle would be invalid: {k:?}"))?;
            let encoded = bundle.encode();
            let mut out: Box<dyn Write> = match &output {
                Some(path) => Box::new(
                    fs::File::create(path)
                        .with_context(|| format!("cannot create {}", path.display()))?,
                ),
                None => Box::new(io::stdout().lock()),
            };
            for part in encoded.parts() {
                out.write_all(part).context("cannot write the bundle")?;
            }
            out.flush().context("cannot write the bundle")?;
            if let Some(path) = output {
                eprintln!(
                    "wrote {} bytes to {} ({})",
                    encoded.len(),
                    path.display(),
                    bundle.id()
                );
            }
            Ok(())
        }
        BundleCommand::Inspect { file } => {
            let bytes = read_input(&file)?;
            let len = bytes.len();
            let bundle = Bundle::decode(bytes)
                .with_context(|| format!("{} is not a valid BPv7 bundle", file.display()))?;
            print!("{}", describe(&bundle, len));
            Ok(())
        }
    }
}

fn read_input(path: &PathBuf) -> Result<Bytes> {
    let mut buf = Vec::new();
    if path.as_os_str() == "-" {
        io::stdin()
            .read_to_end(&mut buf)
            .context("cannot read stdin")?;
    } else {
        buf = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    }
    Ok(Bytes::from(buf))
}

/// The current DTN time.
fn dtn_now() -> Result<DtnTime> {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the clock is before 1970")?;
    let ms = unix
        .as_millis()
        .saturating_sub(u128::from(DTN_EPOCH_UNIX_SECS) * 1000);
    u64::try_from(ms)
        .map(DtnTime::from_millis)
        .context("the clock is past the year 584 million")
}

/// A human-readable account of a bundle.
fn describe(b: &Bundle, encoded_len: usize) -> String {
    use std::fmt::Write as _;
    let p = &b.primary;
    let mut s = String::new();
    let _ = writeln!(s, "bundle      {} ({encoded_len} bytes)", b.id());
    let _ = writeln!(s, "destination {}", p.destination);
    let _ = writeln!(s, "source      {}", p.source);
    let _ = writeln!(s, "report-to   {}", p.report_to);
    let _ = writeln!(
        s,
        "created     {} (DTN ms), sequence {}",
        p.creation.time, p.creation.sequence
    );
    let _ = writeln!(
        s,
        "lifetime    {}",
        humantime::format_duration(Duration::from_millis(p.lifetime_ms))
    );
    let _ = writeln!(s, "flags       {:#x}{}", p.flags.0, flag_names(p.flags));
    let _ = writeln!(s, "primary CRC {:?}", p.crc_type);
    if let Some(f) = p.fragment {
        let _ = writeln!(
            s,
            "fragment    offset {} of {} bytes",
            f.offset, f.total_adu_len
        );
    }
    for block in &b.extensions {
        let what = match &block.data {
            ExtensionData::PreviousNode(e) => format!("previous node {e}"),
            ExtensionData::BundleAge(ms) => format!("bundle age {ms} ms"),
            ExtensionData::HopCount(h) => format!("hop count {} of limit {}", h.count, h.limit),
            ExtensionData::Unknown { block_type, data } => {
                format!("type {block_type}, {} bytes", data.len())
            }
        };
        let _ = writeln!(
            s,
            "block {:<5} {what} (flags {:#x}, CRC {:?})",
            block.number, block.flags.0, block.crc_type
        );
    }
    let _ = writeln!(
        s,
        "payload     {} bytes (CRC {:?})",
        b.payload.data.len(),
        b.payload.crc_type
    );
    if p.is_admin_record() {
        match AdminRecord::decode(&b.payload.data) {
            Ok(record) => {
                let _ = writeln!(s, "admin       {record:?}");
            }
            Err(e) => {
                let _ = writeln!(s, "admin       undecodable: {e}");
            }
        }
    } else if let Ok(text) = std::str::from_utf8(&b.payload.data) {
        let shown: String = text.chars().take(200).collect();
        let _ = writeln!(s, "text        {shown:?}");
    }
    s
}

fn flag_names(f: BundleFlags) -> String {
    let names = [
        (BundleFlags::IS_FRAGMENT, "fragment"),
        (BundleFlags::ADMIN_RECORD, "admin-record"),
        (BundleFlags::MUST_NOT_FRAGMENT, "must-not-fragment"),
        (BundleFlags::APP_ACK_REQUESTED, "app-ack"),
        (BundleFlags::STATUS_TIME_REQUESTED, "status-time"),
        (BundleFlags::REPORT_RECEPTION, "report-reception"),
        (BundleFlags::REPORT_FORWARDING, "report-forwarding"),
        (BundleFlags::REPORT_DELIVERY, "report-delivery"),
        (BundleFlags::REPORT_DELETION, "report-deletion"),
    ];
    let set: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| f.contains(*bit))
        .map(|(_, n)| *n)
        .collect();
    if set.is_empty() {
        String::new()
    } else {
        format!(" ({})", set.join(", "))
    }
}
