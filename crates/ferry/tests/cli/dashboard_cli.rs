//! `ferry dashboard` against a running `ferry node`: it prints the web dashboard's address with
//! the node's token in the fragment (`--no-token` without it, `--json` as a document), refuses
//! to print an address for a token the node refuses, and the page at that address answers
//! without the token. The node's log names the page but never the token.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::common::{Node, TestDir};

#[test]
fn ferry_dashboard_prints_the_page_with_the_token_in_its_fragment() {
    let dir = TestDir::new("dashboard-cli");
    let node = Node::build(dir.path(), "alpha").start();
    let token = std::fs::read_to_string(node.data_dir().join("api-token"))
        .unwrap()
        .trim()
        .to_owned();
    let page = format!("http://{}/", node.api);

    assert_eq!(
        node.ok(&["dashboard"]).trim_end(),
        format!("{page}#token={token}")
    );
    assert_eq!(node.ok(&["dashboard", "--no-token"]).trim_end(), page);
    let doc: serde_json::Value = serde_json::from_str(&node.ok(&["dashboard", "--json"])).unwrap();
    assert_eq!(doc["url"], format!("{page}#token={token}"));
    assert_eq!(doc["node_id"], "dtn://alpha/");

    // A token the node refuses gives no address: the API's refusal (exit 4).
    let out = node
        .command(&["dashboard"])
        .env("FERRY_API_TOKEN", "0".repeat(64))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unauthorized"),
        "{out:?}"
    );

    // The page answers without the token (the fragment never reaches the server).
    let mut answer = ureq::get(&page).call().unwrap();
    assert_eq!(answer.status(), 200);
    let html = answer.body_mut().read_to_string().unwrap();
    assert!(html.contains("/dashboard/app.js"), "{html}");

    let log = node.log();
    assert!(log.contains(&format!("web dashboard: {page}")), "{log}");
    assert!(!log.contains(&token), "the token is in the log:\n{log}");
}
