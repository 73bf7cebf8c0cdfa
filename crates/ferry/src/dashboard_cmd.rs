//! `ferry dashboard`: the address of a node's web dashboard (`daemon::dashboard`), with the
//! API token in its fragment (`http://127.0.0.1:4550/#token=…`).
//!
//! The fragment is never sent to a server, so the token stays out of the node's logs and any
//! proxy's; the page moves it into the tab's session storage and out of the address at once.
//! The command asks the node for its status first, so an address it prints is one that works.
//! It prints and opens nothing else: a browser started with the address on its command line
//! would show the token to every local user (`ps`).

use anyhow::{Result, bail};
use clap::Args;

use crate::api::Status;
use crate::client::{Client, DEFAULT_API};
use crate::output::{print_json_pretty, write_stdout};

#[derive(Args, Debug, Clone)]
pub(crate) struct DashboardArgs {
    /// Address of the node's local API: HOST:PORT or http://HOST:PORT.
    #[arg(long, value_name = "ADDR", env = "FERRY_API", default_value = DEFAULT_API)]
    api: String,
    /// Print the address without the token: the page then asks for it.
    #[arg(long)]
    no_token: bool,
    /// Print `{"url", "node_id"}` as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: DashboardArgs) -> Result<()> {
    let client = Client::new(&args.api);
    // Also proves the token: a node that refuses it fails here, not in the browser.
    let status: Status = client.get_json("/v1/status")?;
    let page = client.url("/");
    let url = match (args.no_token, client.token()) {
        (true, _) => page,
        (false, Some(token)) => format!("{page}#token={token}"),
        (false, None) => bail!(
            "no token found for the API at {} (FERRY_API_TOKEN, or run as the node's user)",
            args.api
        ),
    };
    if args.json {
        return print_json_pretty(&serde_json::json!({
            "url": url,
            "node_id": status.node_id,
        }));
    }
    if !args.no_token {
        eprintln!(
            "the dashboard of {}; open this address in a browser on this machine \
             (it holds the node's API token: whoever has it can use the node):",
            status.node_id
        );
    }
    Ok(write_stdout(&format!("{url}\n"))?)
}
