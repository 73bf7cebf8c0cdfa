//! `ferry send`: hands a payload to the local node, which makes a bundle of it and sends it.
//!
//! Text given on the command line goes as JSON (`POST /v1/bundles`); a file or standard input goes
//! as raw bytes (`POST /v1/bundles/raw`), so binary payloads need no base64 and large ones are
//! streamed from disk.

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use crate::api::{ClassArg, SendReply, SendRequest};
use crate::client::{ApiArgs, Client, api_duration, query};
use crate::names;
use crate::output::{print_json_pretty, progress_bar, with_progress, write_stdout};

/// Arguments of `ferry send`.
#[derive(Args, Debug)]
pub(crate) struct SendArgs {
    /// Where to: an endpoint (dtn://bravo/files, ipn:2.1), NODE/SERVICE (bravo/files), or a
    /// node alone (bravo), which means its `inbox`.
    destination: String,
    /// The payload as text (without it: --file, else standard input).
    #[arg(conflicts_with = "file")]
    text: Option<String>,
    /// Send this file's bytes ("-" for standard input).
    #[arg(long, short, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Source endpoint on this node (default: the node id).
    #[arg(long, value_name = "ENDPOINT")]
    source: Option<String>,
    /// Bundle lifetime.
    #[arg(long, default_value = "1h", value_parser = crate::positive_duration)]
    lifetime: Duration,
    /// Forwarding class.
    #[arg(long, value_enum, default_value = "dtn")]
    class: ClassArg,
    /// Ask for status reports (received, forwarded, delivered, deleted) and follow them until
    /// the destination has reported the whole payload delivered: a progress bar of delivered
    /// bytes on a terminal (fragments move it piece by piece), a line per report otherwise.
    #[arg(long)]
    report: bool,
    /// With --report: how long to follow the reports (the bundle goes on after).
    #[arg(long, value_name = "DUR", default_value = "60s", requires = "report",
          value_parser = crate::positive_duration)]
    report_wait: Duration,
    /// Eviction priority: 0 bulk, 1 normal (the node's default), 2 expedited.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
    priority: Option<u8>,
    #[command(flatten)]
    api: ApiArgs,
}

/// Where the payload comes from.
#[derive(Debug, PartialEq, Eq)]
enum Payload<'a> {
    Text(&'a str),
    File(&'a Path),
    Stdin,
}

impl SendArgs {
    fn payload(&self) -> Payload<'_> {
        match (&self.text, &self.file) {
            (Some(text), _) => Payload::Text(text),
            (None, Some(f)) if f.as_os_str() != "-" => Payload::File(f),
            (None, _) => Payload::Stdin,
        }
    }

    /// The JSON request for a text payload.
    fn json_request(&self, text: &str) -> SendRequest {
        SendRequest {
            destination: self.destination.clone(),
            source: self.source.clone(),
            payload: Some(text.to_owned()),
            payload_base64: None,
            lifetime: Some(api_duration(self.lifetime)),
            class: Some(self.class.as_str().to_owned()),
            report: self.report,
            priority: self.priority,
        }
    }

    /// `/v1/bundles/raw?…` carrying the same options as query parameters.
    fn raw_path(&self) -> String {
        let mut q = vec![("destination", self.destination.clone())];
        if let Some(source) = &self.source {
            q.push(("source", source.clone()));
        }
        q.push(("lifetime", api_duration(self.lifetime)));
        q.push(("class", self.class.as_str().to_owned()));
        if self.report {
            q.push(("report", "true".to_owned()));
        }
        if let Some(p) = self.priority {
            q.push(("priority", p.to_string()));
        }
        format!("/v1/bundles/raw{}", query(&q))
    }
}

pub(crate) fn run(mut args: SendArgs) -> Result<()> {
    args.destination = names::endpoint(&args.destination, names::DEFAULT_SERVICE)?.to_string();
    let client = Client::new(&args.api.api);
    let reply = match args.payload() {
        Payload::Text(text) => client.post_json("/v1/bundles", &args.json_request(text))?,
        Payload::File(path) => {
            let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let len = file
                .metadata()
                .with_context(|| format!("reading {}", path.display()))?
                .len();
            let bar = progress_bar(Some(len), "sending");
            let reply = client.post_raw(&args.raw_path(), with_progress(file, bar.as_ref()), len);
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            reply?
        }
        Payload::Stdin => {
            // Read whole, so the node learns the size up front and can refuse it before the
            // transfer rather than after.
            if io::stdin().is_terminal() {
                eprintln!("ferry: reading the payload from standard input (end it with Ctrl-D)");
            }
            let mut bytes = Vec::new();
            io::stdin()
                .read_to_end(&mut bytes)
                .context("reading standard input")?;
            let len = bytes.len() as u64;
            client.post_raw(&args.raw_path(), io::Cursor::new(bytes), len)?
        }
    };
    let sent: SendReply = serde_json::from_value(reply.clone())
        .context("unexpected answer from the ferry node API to a send")?;
    if !args.api.json {
        // The id first: a script has it even if following the reports ends badly.
        write_stdout(&format!("{}\n", sent.id))?;
    }
    if !args.report {
        return if args.api.json {
            print_json_pretty(&reply)
        } else {
            Ok(())
        };
    }
    let followed = crate::follow::follow(
        &client,
        &sent.id,
        sent.size,
        args.report_wait,
        args.api.json,
    );
    match (followed, args.api.json) {
        (Ok(_), false) => Ok(()),
        (Ok(reports), true) => print_json_pretty(&serde_json::json!({
            "id": sent.id,
            "size": sent.size,
            "reports": reports,
        })),
        (Err(e), false) => Err(e),
        (Err(e), true) => match e.downcast::<crate::exit::Failure>() {
            Ok(f) => Err(f.with_document("sent", serde_json::to_value(&sent)?).into()),
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        send: SendArgs,
    }

    fn parse(args: &[&str]) -> Result<SendArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("send").chain(args.iter().copied())).map(|c| c.send)
    }

    #[test]
    fn text_file_or_stdin() {
        let a = parse(&["dtn://b/inbox", "hello"]).unwrap();
        assert_eq!(a.payload(), Payload::Text("hello"));
        let a = parse(&["dtn://b/inbox", "--file", "x.bin"]).unwrap();
        assert_eq!(a.payload(), Payload::File(Path::new("x.bin")));
        let a = parse(&["dtn://b/inbox", "-f", "-"]).unwrap();
        assert_eq!(a.payload(), Payload::Stdin);
        let a = parse(&["dtn://b/inbox"]).unwrap();
        assert_eq!(a.payload(), Payload::Stdin);
        assert!(parse(&["dtn://b/inbox", "hello", "--file", "x"]).is_err());
    }

    #[test]
    fn options_are_checked() {
        assert!(parse(&["dtn://b/", "x", "--priority", "3"]).is_err());
        assert!(parse(&["dtn://b/", "x", "--class", "carrier-pigeon"]).is_err());
        assert!(parse(&["dtn://b/", "x", "--lifetime", "soon"]).is_err());
        assert!(parse(&["dtn://b/", "x", "--lifetime", "0s"]).is_err());
        assert!(parse(&["dtn://b/", "x", "--lifetime", "1ms"]).is_ok());
        assert!(parse(&[]).is_err(), "a destination is required");
    }

    #[test]
    fn text_goes_as_json() {
        let a = parse(&[
            "dtn://b/inbox",
            "hi",
            "--lifetime",
            "90m",
            "--class",
            "datagram",
            "--report",
        ])
        .unwrap();
        let body = serde_json::to_value(a.json_request("hi")).unwrap();
        assert_eq!(body["destination"], "dtn://b/inbox");
        assert_eq!(body["payload"], "hi");
        assert_eq!(body["lifetime"], "5400s");
        assert_eq!(body["class"], "datagram");
        assert_eq!(body["report"], true);
        assert_eq!(body["priority"], serde_json::Value::Null);
    }

    #[test]
    fn files_go_raw_with_their_options_in_the_query() {
        let a = parse(&["dtn://b/inbox", "-f", "x"]).unwrap();
        assert_eq!(
            a.raw_path(),
            "/v1/bundles/raw?destination=dtn%3A%2F%2Fb%2Finbox&lifetime=3600s&class=dtn"
        );
        let a = parse(&[
            "dtn://b/inbox",
            "-f",
            "x",
            "--source",
            "dtn://a/cam",
            "--report",
            "--priority",
            "2",
        ])
        .unwrap();
        assert_eq!(
            a.raw_path(),
            "/v1/bundles/raw?destination=dtn%3A%2F%2Fb%2Finbox&source=dtn%3A%2F%2Fa%2Fcam\
             &lifetime=3600s&class=dtn&report=true&priority=2"
        );
    }
}
