//! The requirement language from outside: the issue's example, precedence, units, every error
//! message with its offset, unknown facts, explanations of failures, hostile input, and the
//! canonical form's round trip.

use proptest::prelude::*;
use rpc::require::{
    FACT_INFO, FACTS, FactKind, Facts, MAX_DEPTH, MAX_SOURCE_LEN, ParseError, Requirement, Verdict,
    fact_info,
};

const EXAMPLE: &str = "battery >= 50 && has(gps) && free_disk >= 1GB";

fn parse(src: &str) -> Requirement {
    match Requirement::parse(src) {
        Ok(r) => r,
        Err(e) => panic!("{src:?} does not parse:\n{}", e.render(src)),
    }
}

fn error(src: &str) -> ParseError {
    match Requirement::parse(src) {
        Ok(r) => panic!("{src:?} parsed, as {r}"),
        Err(e) => e,
    }
}

/// Asserts that `src` fails to parse at `offset` with a message starting with `message`.
#[track_caller]
fn assert_error(src: &str, offset: usize, message: &str) {
    let e = error(src);
    assert!(
        e.message.starts_with(message) && e.offset == offset,
        "{src:?}: expected at {offset}: {message}\n got at {}: {}\n{}",
        e.offset,
        e.message,
        e.render(src)
    );
}

/// A healthy phone: 80 % battery, GPS, 2 GB free.
fn phone() -> Facts {
    let mut f = Facts::new();
    f.set("battery", 80.0)
        .set("free_disk", 2e9)
        .set("free_memory", 3e9)
        .set("load", 0.5)
        .set("cpus", 8.0)
        .set("running", 0.0)
        .set("hour", 10.0)
        .set("minute", 30.0)
        .set("weekday", 3.0)
        .set("uptime", 7200.0)
        .set_flag("moving", false)
        .set_flag("charging", false)
        .add_tag("gps")
        .add_tag("camera");
    f
}

fn fail(src: &str, facts: &Facts) -> String {
    match parse(src).check(facts) {
        Verdict::Pass => panic!("{src:?} passed"),
        Verdict::Fail(why) => why,
    }
}

fn passes(src: &str, facts: &Facts) -> bool {
    parse(src).check(facts).is_pass()
}

// --- the issue's example ---

#[test]
fn issue_example_passes_on_a_healthy_phone() {
    assert_eq!(parse(EXAMPLE).check(&phone()), Verdict::Pass);
}

#[test]
fn issue_example_names_the_failing_clause() {
    let mut low = phone();
    low.set("battery", 31.0);
    assert_eq!(fail(EXAMPLE, &low), "battery >= 50 (battery is 31)");

    let mut no_gps = phone();
    no_gps.remove_tag("gps");
    assert_eq!(fail(EXAMPLE, &no_gps), "has(gps) (no such hardware)");

    let mut full = phone();
    full.set("free_disk", 512e6);
    assert_eq!(
        fail(EXAMPLE, &full),
        "free_disk >= 1GB (free_disk is 512 MB)"
    );

    // The first failing clause, left to right.
    let mut all_bad = Facts::new();
    all_bad.set("battery", 10.0).set("free_disk", 0.0);
    assert_eq!(fail(EXAMPLE, &all_bad), "battery >= 50 (battery is 10)");
}

#[test]
fn issue_example_displays_as_written() {
    let r = parse(EXAMPLE);
    assert_eq!(r.to_string(), EXAMPLE);
    assert_eq!(r.source(), EXAMPLE);
    assert_eq!(
        r.facts().into_iter().collect::<Vec<_>>(),
        ["battery", "free_disk"]
    );
    assert_eq!(r.tags().into_iter().collect::<Vec<_>>(), ["gps"]);
}

// --- precedence and structure ---

#[test]
fn and_binds_tighter_than_or() {
    let f = Facts::new();
    assert!(passes("true || false && false", &f));
    assert!(passes("false && false || true", &f));
    assert!(!passes("(true || false) && false", &f));
    assert_eq!(
        parse("true || false && false").to_string(),
        "true || false && false"
    );
    assert_eq!(
        parse("(true || false) && false").to_string(),
        "(true || false) && false"
    );
}

#[test]
fn not_binds_tightest() {
    let f = Facts::new();
    assert!(!passes("!false && false", &f));
    assert!(passes("!(false && false)", &f));
    assert!(passes("!false || false", &f));
    assert!(passes("!!true", &f));
    assert!(!passes("!!!true", &f));
}

#[test]
fn comparisons_bind_tighter_than_and() {
    let f = phone();
    assert!(passes("battery >= 50 && cpus == 8", &f));
    assert!(passes("cpus == 1 || battery > 79.5", &f));
    assert!(passes("50 <= battery && 9 > load", &f));
    assert!(!passes("50 > battery", &f));
}

#[test]
fn chains_are_flat_and_parentheses_are_kept_where_they_shape_the_tree() {
    assert_eq!(
        parse("true&&true&&false").to_string(),
        "true && true && false"
    );
    assert_eq!(parse("((moving))").to_string(), "moving");
    assert_eq!(
        parse("(true && moving) && charging").to_string(),
        "(true && moving) && charging"
    );
    assert_ne!(
        parse("(true && moving) && charging"),
        parse("true && moving && charging")
    );
    assert_eq!(
        parse(
            "(a||b)"
                .replace("a", "moving")
                .replace("b", "charging")
                .as_str()
        )
        .to_string(),
        "moving || charging"
    );
    assert_eq!(parse("!(battery>=50)").to_string(), "!(battery >= 50)");
    assert_eq!(parse("!has(GPS)").to_string(), "!has(gps)");
}

#[test]
fn canonical_form_normalises_spacing_units_and_numbers() {
    let r = parse("  free_disk>=1.50gb&&battery>=050 %&&uptime>2 MIN\n&&has( GPS )");
    assert_eq!(
        r.to_string(),
        "free_disk >= 1.5GB && battery >= 50% && uptime > 2min && has(gps)"
    );
    assert_eq!(parse(&r.to_string()), r);
    assert_eq!(parse("battery>=50"), parse("battery >= 50"));
    assert_ne!(parse("battery >= 50"), parse("50 <= battery"));
    assert_eq!(parse("50 <= battery").to_string(), "50 <= battery");
}

#[test]
fn empty_and_true_are_always() {
    for src in ["", "   ", "\n\t ", "true", "(true)"] {
        let r = parse(src);
        assert!(r.is_always(), "{src:?}");
        assert_eq!(r.check(&Facts::new()), Verdict::Pass);
        assert_eq!(r, Requirement::always());
    }
    assert_eq!(parse("   ").source(), "   ");
    assert_eq!(Requirement::always().source(), "");
    assert_eq!(Requirement::always().to_string(), "true");
    assert_eq!(Requirement::default(), Requirement::always());
    assert!(!parse("!false").is_always());
    assert!(!parse("moving").is_always());
    assert_eq!("".parse::<Requirement>().unwrap(), Requirement::always());
}

// --- units ---

#[test]
fn decimal_binary_percent_and_time_units() {
    let at = |fact: &str, v: f64| {
        let mut f = Facts::new();
        f.set(fact, v);
        f
    };
    let cases: &[(&str, &str, f64)] = &[
        ("free_disk >= 1GB", "free_disk", 1e9),
        ("free_disk >= 1gb", "free_disk", 1e9),
        ("free_disk >= 1 GB", "free_disk", 1e9),
        ("free_disk >= 1GiB", "free_disk", 1_073_741_824.0),
        ("free_disk >= 1gib", "free_disk", 1_073_741_824.0),
        ("free_memory >= 1.5KB", "free_memory", 1500.0),
        ("free_memory >= 2KiB", "free_memory", 2048.0),
        ("free_memory >= 3MB", "free_memory", 3e6),
        ("free_memory >= 3MiB", "free_memory", 3.0 * 1024.0 * 1024.0),
        ("free_disk >= 2TB", "free_disk", 2e12),
        ("free_disk >= 1TiB", "free_disk", 1_099_511_627_776.0),
        ("free_disk >= 10B", "free_disk", 10.0),
        ("free_disk >= 1000000000", "free_disk", 1e9),
        ("battery >= 50%", "battery", 50.0),
        ("battery >= 50", "battery", 50.0),
        ("uptime >= 90s", "uptime", 90.0),
        ("uptime >= 2min", "uptime", 120.0),
        ("uptime >= 1.5h", "uptime", 5400.0),
        ("uptime >= 1d", "uptime", 86400.0),
        ("load >= 0.25", "load", 0.25),
    ];
    for &(src, fact, threshold) in cases {
        assert!(passes(src, &at(fact, threshold)), "{src} at {threshold}");
        let below = threshold - threshold.abs().max(1.0) * 1e-9;
        assert!(!passes(src, &at(fact, below)), "{src} at {below}");
    }
    assert_eq!(parse("free_disk >= 1GB"), parse("free_disk >= 1gB"));
    assert_ne!(parse("free_disk >= 1GB"), parse("free_disk >= 1000MB"));
}

#[test]
fn fractional_quantities_are_exact() {
    let at = |fact: &str, v: f64| {
        let mut f = Facts::new();
        f.set(fact, v);
        f
    };
    assert!(passes(
        "free_disk == 1.1GB",
        &at("free_disk", 1_100_000_000.0)
    ));
    assert!(passes("free_disk == 0.3KB", &at("free_disk", 300.0)));
    assert!(passes(
        "free_disk == 2.3TB",
        &at("free_disk", 2_300_000_000_000.0)
    ));
    assert!(passes(
        "free_memory == 1.1MiB",
        &at("free_memory", 1_153_433.6)
    ));
    assert!(passes("uptime == 1.1h", &at("uptime", 3960.0)));
    assert!(passes("uptime == 0.7min", &at("uptime", 42.0)));
    assert!(passes("load == 0.1", &at("load", 0.1)));
}

#[test]
fn units_must_fit_their_fact() {
    assert_error(
        "battery >= 1GB",
        12,
        "unit \"GB\" does not fit \"battery\", which is a percentage",
    );
    assert_error(
        "free_disk >= 50%",
        15,
        "unit \"%\" does not fit \"free_disk\", which is a size in bytes",
    );
    assert_error(
        "hour >= 9h",
        9,
        "unit \"h\" does not fit \"hour\", which is a plain number",
    );
    assert_error(
        "2GB <= uptime",
        1,
        "unit \"GB\" does not fit \"uptime\", which is a duration in seconds",
    );
}

// --- error messages and offsets ---

#[test]
fn unknown_facts_are_named_with_a_suggestion() {
    assert_error(
        "batery >= 50",
        0,
        "unknown fact \"batery\" (did you mean \"battery\"?)",
    );
    assert_error(
        "has(gps) && free_dsk >= 1GB",
        12,
        "unknown fact \"free_dsk\" (did you mean \"free_disk\"?)",
    );
    assert_error(
        "Battery >= 50",
        0,
        "unknown fact \"Battery\" (did you mean \"battery\"?)",
    );
    assert_error(
        "free-disk >= 1GB",
        0,
        "unknown fact \"free-disk\" (did you mean \"free_disk\"?)",
    );
    assert_error(
        "50 <= batery",
        6,
        "unknown fact \"batery\" (did you mean \"battery\"?)",
    );
    assert_error(
        "temperature < 40",
        0,
        "unknown fact \"temperature\" (facts: battery, free_disk,",
    );
    assert_error(
        "battery >= 50 && gps",
        17,
        "unknown fact \"gps\" (for a hardware tag, write \"has(gps)\")",
    );
    assert_error(
        "hsa(gps)",
        0,
        "unknown function \"hsa\" (did you mean \"has\"?)",
    );
    assert_error(
        "count(gps)",
        0,
        "unknown function \"count\": the only one is \"has(tag)\"",
    );
}

#[test]
fn comparisons_need_a_number_and_a_fact() {
    assert_error("battery >= ", 11, "expected a number after \">=\"");
    assert_error("battery >= abc", 11, "expected a number after \">=\"");
    assert_error(
        "battery >= cpus",
        11,
        "expected a number after \">=\" (a fact is compared with a number, not with another fact)",
    );
    assert_error("battery < (50)", 10, "expected a number after \"<\"");
    assert_error("50 <= ", 6, "expected a fact after \"<=\"");
    assert_error("50 <= true", 6, "expected a fact after \"<=\"");
    assert_error(
        "50",
        0,
        "a number alone is not a condition: compare a fact with it, e.g. \"battery >= 50\"",
    );
    assert_error(
        "battery",
        0,
        "\"battery\" is a number: compare it, e.g. \"battery >= 50\"",
    );
    assert_error(
        "has(gps) && free_disk",
        12,
        "\"free_disk\" is a number: compare it, e.g. \"free_disk >= 1GB\"",
    );
    assert_error("!battery", 1, "\"battery\" is a number: compare it");
    assert_error(">= 50", 0, "expected a fact before \">=\"");
}

#[test]
fn yes_no_facts_are_not_compared() {
    let msg = "\"moving\" is a yes/no fact: write \"moving\" or \"!moving\"";
    assert_error("moving == true", 0, msg);
    assert_error("battery > 5 && moving >= 1", 15, msg);
    assert_error("1 == moving", 5, msg);
    assert_error(
        "charging != 0",
        0,
        "\"charging\" is a yes/no fact: write \"charging\" or \"!charging\"",
    );
}

#[test]
fn comparisons_do_not_chain_and_negating_one_needs_parentheses() {
    assert_error("hour >= 9 < 17", 10, "comparisons do not chain");
    assert_error("9 <= hour < 17", 10, "comparisons do not chain");
    assert_error(
        "!battery >= 50",
        0,
        "\"!\" binds tighter than a comparison: write \"!(battery >= 50)\"",
    );
    assert_error(
        "moving || !50 <= battery",
        10,
        "\"!\" binds tighter than a comparison: write \"!(50 <= battery)\"",
    );
    assert_error("has(gps) == 1", 9, "\"==\" cannot follow a condition");
    assert_error("(battery > 1) > 1", 14, "\">\" cannot follow a condition");
}

#[test]
fn unknown_units_and_malformed_numbers() {
    assert_error(
        "free_disk >= 1GX",
        14,
        "unknown unit \"GX\" (units: %, B, KB,",
    );
    assert_error("free_disk >= 1 GX", 15, "unknown unit \"GX\"");
    assert_error("battery >= 5O", 12, "unknown unit \"O\"");
    assert_error("battery >= 1e3", 12, "unknown unit \"e3\"");
    assert_error(
        "battery >= 1.",
        12,
        "expected digits after the decimal point",
    );
    assert_error(
        "battery >= 1.2.3",
        14,
        "a number has one decimal point at most",
    );
    assert_error("battery >= .5", 11, "a number starts with a digit");
    assert_error("battery >= -5", 11, "numbers cannot be negative");
    let huge = format!("free_disk >= {}", "9".repeat(400));
    assert_error(&huge, 13, "number too large");
    let overflow = format!("free_disk >= 1{}TiB", "0".repeat(300));
    assert_error(&overflow, 13, "number too large");
}

#[test]
fn parentheses_must_balance() {
    assert_error(
        "(battery >= 50",
        0,
        "unbalanced parenthesis: this \"(\" is never closed",
    );
    assert_error(
        "moving && (battery >= 50 || (charging)",
        10,
        "unbalanced parenthesis: this \"(\" is never closed",
    );
    assert_error(
        "battery >= 50)",
        13,
        "unbalanced parenthesis: this \")\" has no matching \"(\"",
    );
    assert_error(")", 0, "unbalanced parenthesis");
    assert_error("has(gps", 3, "unbalanced parenthesis");
    assert_error("()", 1, "empty parentheses");
    assert_error(
        "(battery >= 50 cpus > 1)",
        15,
        "expected \"&&\", \"||\" or \")\" before \"cpus\"",
    );
}

#[test]
fn has_takes_one_tag() {
    assert_error("has()", 4, "has() takes one tag");
    assert_error("has( )", 5, "has() takes one tag");
    assert_error("has(gps, camera)", 7, "has() takes one tag");
    assert_error("has(gps camera)", 8, "has() takes one tag");
    assert_error(
        "has gps",
        4,
        "expected \"(\" after \"has\", e.g. \"has(gps)\"",
    );
    assert_error("has", 3, "expected \"(\" after \"has\"");
    assert_error("has(\"gps\")", 4, "write the tag without quotes");
    assert_error("has(g.ps)", 5, "unexpected character \".\" in a tag");
    // Tags may start with a digit and hold dashes.
    assert!(passes("has(4G-modem)", Facts::new().add_tag("4g-MODEM")));
}

#[test]
fn operators_from_other_languages_are_corrected() {
    assert_error(
        "moving & charging",
        7,
        "\"&\" is not an operator: write \"&&\"",
    );
    assert_error(
        "moving | charging",
        7,
        "\"|\" is not an operator: write \"||\"",
    );
    assert_error("battery = 50", 8, "\"=\" is not an operator: write \"==\"");
    assert_error(
        "battery => 50",
        8,
        "\"=>\" is not an operator: write \">=\"",
    );
    assert_error(
        "battery =< 50",
        8,
        "\"=<\" is not an operator: write \"<=\"",
    );
    assert_error(
        "battery <> 50",
        8,
        "\"<>\" is not an operator: write \"!=\"",
    );
    assert_error("moving and charging", 7, "write \"&&\" instead of \"and\"");
    assert_error(
        "battery > 5 or charging",
        12,
        "write \"||\" instead of \"or\"",
    );
    assert_error("not moving", 0, "write \"!\" instead of \"not\"");
    assert_error("battery > 5 # comment", 12, "unexpected character \"#\"");
    assert_error("moving ; charging", 7, "unexpected character \";\"");
    assert_error("'moving'", 0, "quotes are not part of the language");
}

#[test]
fn missing_operands_are_reported_where_they_are_missing() {
    assert_error("&& moving", 0, "expected a condition before \"&&\"");
    assert_error("(|| moving)", 1, "expected a condition before \"||\"");
    assert_error("moving &&", 9, "expected a condition after \"&&\"");
    assert_error(
        "moving && || charging",
        10,
        "expected a condition after \"&&\"",
    );
    assert_error("moving && )", 10, "expected a condition after \"&&\"");
    assert_error("!", 1, "expected a condition after \"!\"");
    assert_error(
        "moving charging",
        7,
        "expected \"&&\" or \"||\" before \"charging\"",
    );
    assert_error(
        "battery >= 50 has(gps)",
        14,
        "expected \"&&\" or \"||\" before \"has\"",
    );
    assert_error("moving,", 6, "expected \"&&\" or \"||\" before \",\"");
}

#[test]
fn length_and_depth_are_limited() {
    let long = "true && ".repeat(200) + "true";
    assert!(long.len() > MAX_SOURCE_LEN);
    assert_error(
        &long,
        MAX_SOURCE_LEN,
        "a requirement is at most 1024 bytes long",
    );

    let ok = "(".repeat(MAX_DEPTH) + "moving" + &")".repeat(MAX_DEPTH);
    assert_eq!(parse(&ok).to_string(), "moving");
    let deep = "(".repeat(MAX_DEPTH + 1) + "moving" + &")".repeat(MAX_DEPTH + 1);
    assert_error(
        &deep,
        MAX_DEPTH,
        "nested too deeply: at most 32 levels of \"(\" and \"!\"",
    );

    let nots = "!".repeat(MAX_DEPTH) + "moving";
    assert_eq!(parse(&nots).to_string(), nots);
    assert_error(
        &("!".repeat(MAX_DEPTH + 1) + "moving"),
        MAX_DEPTH,
        "nested too deeply",
    );
    assert_error(&("!(".repeat(20) + "moving"), 32, "nested too deeply");

    // Hostile sizes fail fast, at a character boundary.
    assert_error(
        &"(".repeat(100_000),
        MAX_SOURCE_LEN,
        "a requirement is at most",
    );
    assert_error(&"(".repeat(1000), MAX_DEPTH, "nested too deeply");
    let mib = "a".repeat(1 << 20);
    assert_error(&mib, MAX_SOURCE_LEN, "a requirement is at most");
    let wide = "é".repeat(600);
    let e = error(&wide);
    assert!(wide.is_char_boundary(e.offset) && e.offset <= MAX_SOURCE_LEN);
}

#[test]
fn errors_display_a_column_and_render_a_caret() {
    let src = "battery >= 50 && has(gps";
    let e = error(src);
    assert_eq!(e.offset, 20);
    assert_eq!(
        e.to_string(),
        "at column 21: unbalanced parenthesis: this \"(\" is never closed"
    );
    assert_eq!(
        e.render(src),
        "battery >= 50 && has(gps\n                    ^ unbalanced parenthesis: this \"(\" is never closed"
    );

    // The caret is placed on the error's line, at its character.
    let src = "moving &&\n\tbatery > 5";
    let e = error(src);
    assert_eq!(e.offset, 11);
    assert_eq!(
        e.render(src),
        "\tbatery > 5\n\t^ unknown fact \"batery\" (did you mean \"battery\"?)"
    );
    let src = "hour >= 9 && ünknown";
    let e = error(src);
    assert_eq!(
        e.render(src),
        "hour >= 9 && ünknown\n             ^ unexpected character \"ü\""
    );

    // At the end of the source, and with an offset from elsewhere: no panic.
    let e = error("battery >=");
    assert_eq!(
        e.render("battery >="),
        "battery >=\n          ^ expected a number after \">=\""
    );
    let stray = ParseError {
        offset: 99,
        message: "x".into(),
    };
    assert_eq!(stray.render("é"), "é\n ^ x");
    let e: Box<dyn std::error::Error> = Box::new(error("batery"));
    assert!(e.to_string().starts_with("at column 1: unknown fact"));
}

// --- explanations, unknown facts ---

#[test]
fn failures_explain_themselves() {
    let f = phone();
    let mut low = phone();
    low.set("battery", 31.0);
    assert_eq!(
        fail("battery >= 50 || charging", &low),
        "battery >= 50 || charging (battery is 31, not charging)"
    );
    assert_eq!(
        fail("has(lidar) || has(sonar)", &f),
        "has(lidar) || has(sonar) (no lidar, no sonar)"
    );
    let mut moving = phone();
    moving.set_flag("moving", true);
    assert_eq!(fail("!moving", &moving), "!moving (moving)");
    assert_eq!(fail("charging", &f), "charging (not charging)");
    assert_eq!(fail("!has(gps)", &f), "!has(gps) (has gps)");
    assert_eq!(
        fail("!(hour >= 9 && hour < 17)", &f),
        "!(hour >= 9 && hour < 17) (hour is 10)"
    );
    assert_eq!(
        fail("moving || !(cpus > 2 && has(camera))", &f),
        "moving || !(cpus > 2 && has(camera)) (not moving, cpus is 8, has camera)"
    );
    assert_eq!(
        fail("has(gps) && (battery < 20 || hour > 20)", &f),
        "battery < 20 || hour > 20 (battery is 80, hour is 10)"
    );
    assert_eq!(fail("false", &f), "false");
    assert_eq!(fail("true && !true", &f), "!true");
    assert_eq!(fail("50 > battery", &f), "50 > battery (battery is 80)");
    assert_eq!(Verdict::Fail("x (y)".into()).to_string(), "fails: x (y)");
}

#[test]
fn values_are_shown_in_readable_units_unless_rounding_would_mislead() {
    let with = |fact: &str, v: f64| {
        let mut f = Facts::new();
        f.set(fact, v);
        f
    };
    assert_eq!(
        fail("free_memory >= 2GiB", &with("free_memory", 1_073_741_824.0)),
        "free_memory >= 2GiB (free_memory is 1 GiB)"
    );
    assert_eq!(
        fail("free_disk >= 1GB", &with("free_disk", 1.5e6)),
        "free_disk >= 1GB (free_disk is 1.5 MB)"
    );
    assert_eq!(
        fail("free_disk >= 1GB", &with("free_disk", 999_999_999.0)),
        "free_disk >= 1GB (free_disk is 999999999 B)"
    );
    assert_eq!(
        fail("free_disk >= 1KB", &with("free_disk", 12.0)),
        "free_disk >= 1KB (free_disk is 12 B)"
    );
    assert_eq!(
        fail("uptime >= 1h", &with("uptime", 1200.0)),
        "uptime >= 1h (uptime is 20 min)"
    );
    assert_eq!(
        fail("uptime >= 1d", &with("uptime", 5400.0)),
        "uptime >= 1d (uptime is 1.5 h)"
    );
    assert_eq!(
        fail("load < 2", &with("load", 2.34567)),
        "load < 2 (load is 2.35)"
    );
    assert_eq!(
        fail("battery >= 50", &with("battery", 49.999)),
        "battery >= 50 (battery is 49.999)"
    );
}

#[test]
fn missing_facts_fail_with_unknown_here() {
    let mut mains = phone();
    mains.unset("battery");
    assert_eq!(
        fail(EXAMPLE, &mains),
        "battery >= 50 (battery is unknown here)"
    );
    // Negation does not turn an unknown into a pass.
    assert_eq!(
        fail("!(battery < 20)", &mains),
        "!(battery < 20) (battery is unknown here)"
    );
    // Another branch can still pass.
    mains.set_flag("charging", true);
    assert!(passes("battery >= 50 || charging", &mains));
    assert!(passes("charging || battery >= 50", &mains));
    mains.set_flag("charging", false);
    assert_eq!(
        fail("battery >= 50 || charging", &mains),
        "battery >= 50 || charging (battery is unknown here, not charging)"
    );
    // Flags can be unknown too; tags are present or not.
    let nothing = Facts::new();
    assert_eq!(
        fail("!moving", &nothing),
        "!moving (moving is unknown here)"
    );
    assert_eq!(fail("moving", &nothing), "moving (moving is unknown here)");
    assert!(passes("!has(gps)", &nothing));
    // A value that is not a number is unknown.
    let mut nan = Facts::new();
    nan.set("load", f64::NAN);
    assert_eq!(nan.get("load"), None);
    assert_eq!(fail("load < 1", &nan), "load < 1 (load is unknown here)");
}

#[test]
fn facts_store_what_a_server_knows() {
    let mut f = Facts::new();
    f.set("battery", 42.0)
        .set_flag("moving", true)
        .add_tag("GPS");
    assert_eq!(f.get("battery"), Some(42.0));
    assert_eq!(f.get("cpus"), None);
    assert_eq!(f.flag("moving"), Some(true));
    assert_eq!(f.flag("charging"), None);
    assert!(f.has_tag("gps") && f.has_tag("Gps"));
    assert!(!f.has_tag("camera"));
    assert_eq!(f.tags().collect::<Vec<_>>(), ["gps"]);
    assert!(passes(
        "has(gps) && has(GPS) && battery == 42 && moving",
        &f
    ));
}

#[test]
fn every_listed_fact_parses_and_has_a_description() {
    assert_eq!(FACTS.len(), 12);
    for &(name, kind) in FACTS {
        let info = fact_info(name).unwrap();
        assert_eq!(info.kind, kind);
        assert!(!info.description.is_empty() && !info.description.contains('\n'));
        let example = parse(info.example);
        assert!(example.facts().contains(name), "{}", info.example);
        match kind {
            FactKind::Number => {
                parse(&format!("{name} >= 1"));
                assert_error(name, 0, &format!("\"{name}\" is a number"));
            }
            FactKind::Flag => {
                parse(name);
                parse(&format!("!{name}"));
                assert_error(
                    &format!("{name} == 1"),
                    0,
                    &format!("\"{name}\" is a yes/no fact"),
                );
            }
        }
    }
    assert_eq!(FACT_INFO.len(), FACTS.len());
    assert!(fact_info("batery").is_none());
    assert_eq!(FactKind::Flag.name(), "yes/no");
}

// --- properties ---

/// A test-side expression tree: printed to source, evaluated here, compared with the crate.
#[derive(Debug, Clone)]
enum T {
    Bool(bool),
    Flag(&'static str),
    Has(&'static str),
    Cmp {
        fact: &'static str,
        op: &'static str,
        number: String,
        unit: &'static str,
        fact_first: bool,
    },
    Not(Box<T>),
    And(Vec<T>),
    Or(Vec<T>),
}

const NUMBER_FACTS: [&str; 10] = [
    "battery",
    "free_disk",
    "free_memory",
    "load",
    "cpus",
    "running",
    "hour",
    "minute",
    "weekday",
    "uptime",
];
const OPS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];
const TAGS: [&str; 4] = ["gps", "camera", "lora", "4g-modem"];

fn units_of(fact: &str) -> &'static [&'static str] {
    match fact {
        "battery" => &["", "%"],
        "free_disk" | "free_memory" => {
            &["", "B", "KB", "mb", "GB", "TB", "KiB", "MiB", "gib", "TiB"]
        }
        "uptime" => &["", "s", "min", "h", "d"],
        _ => &[""],
    }
}

fn scale(unit: &str) -> f64 {
    match unit.to_ascii_lowercase().as_str() {
        "" | "%" | "b" | "s" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => panic!("unit {other}"),
    }
}

/// `number × scale` in exact decimal arithmetic, rounded once.
fn exact(number: &str, scale: f64) -> f64 {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let mantissa: u128 = format!("{whole}{fraction}").parse().unwrap();
    let product = mantissa * scale as u128;
    format!("{product}e-{}", fraction.len()).parse().unwrap()
}

fn leaf() -> impl Strategy<Value = T> {
    let cmp = (
        0..NUMBER_FACTS.len(),
        0..OPS.len(),
        0u32..12,
        prop::option::of(0u32..100),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(f, o, whole, frac, unit, fact_first)| {
            let fact = NUMBER_FACTS[f];
            let units = units_of(fact);
            T::Cmp {
                fact,
                op: OPS[o],
                number: match frac {
                    Some(frac) => format!("{whole}.{frac}"),
                    None => whole.to_string(),
                },
                unit: units[unit.index(units.len())],
                fact_first,
            }
        });
    prop_oneof![
        any::<bool>().prop_map(T::Bool),
        prop::sample::select(vec!["moving", "charging"]).prop_map(T::Flag),
        prop::sample::select(TAGS.to_vec()).prop_map(T::Has),
        cmp.clone(),
        cmp,
    ]
}

fn tree() -> impl Strategy<Value = T> {
    leaf().prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| T::Not(Box::new(t))),
            prop::collection::vec(inner.clone(), 2..4).prop_map(T::And),
            prop::collection::vec(inner, 2..4).prop_map(T::Or),
        ]
    })
}

/// Prints a tree with the parentheses its structure needs, plus `extra` around some nodes;
/// `spaced` puts spaces around operators and between numbers and units.
fn print(t: &T, spaced: bool, extra: &mut impl FnMut() -> bool) -> String {
    let sp = if spaced { " " } else { "" };
    let wrap = |s: String, needed: bool, extra: &mut dyn FnMut() -> bool| {
        if needed || extra() {
            format!("({s})")
        } else {
            s
        }
    };
    match t {
        T::Bool(b) => b.to_string(),
        T::Flag(f) => f.to_string(),
        T::Has(tag) => format!("has({sp}{tag}{sp})"),
        T::Cmp {
            fact,
            op,
            number,
            unit,
            fact_first,
        } => {
            let q = format!("{number}{}{unit}", if unit.is_empty() { "" } else { sp });
            if *fact_first {
                format!("{fact}{sp}{op}{sp}{q}")
            } else {
                format!("{q}{sp}{op}{sp}{fact}")
            }
        }
        T::Not(inner) => {
            let needed = matches!(**inner, T::Cmp { .. } | T::And(_) | T::Or(_));
            let s = print(inner, spaced, extra);
            format!("!{}", wrap(s, needed, extra))
        }
        T::And(items) => items
            .iter()
            .map(|i| {
                let needed = matches!(i, T::And(_) | T::Or(_));
                let s = print(i, spaced, extra);
                wrap(s, needed, extra)
            })
            .collect::<Vec<_>>()
            .join(&format!("{sp}&&{sp}")),
        T::Or(items) => items
            .iter()
            .map(|i| {
                let needed = matches!(i, T::Or(_));
                let s = print(i, spaced, extra);
                wrap(s, needed, extra)
            })
            .collect::<Vec<_>>()
            .join(&format!("{sp}||{sp}")),
    }
}

fn truth(t: &T, f: &Facts) -> bool {
    match t {
        T::Bool(b) => *b,
        T::Flag(name) => f.flag(name).unwrap(),
        T::Has(tag) => f.has_tag(tag),
        T::Cmp {
            fact,
            op,
            number,
            unit,
            fact_first,
        } => {
            let q = exact(number, scale(unit));
            let v = f.get(fact).unwrap();
            let (l, r) = if *fact_first { (v, q) } else { (q, v) };
            match *op {
                "==" => l == r,
                "!=" => l != r,
                "<" => l < r,
                "<=" => l <= r,
                ">" => l > r,
                ">=" => l >= r,
                _ => unreachable!(),
            }
        }
        T::Not(inner) => !truth(inner, f),
        T::And(items) => items.iter().all(|i| truth(i, f)),
        T::Or(items) => items.iter().any(|i| truth(i, f)),
    }
}

/// Every fact known, often equal to the thresholds the generator writes (so `>=` and `>`
/// differ).
fn facts() -> impl Strategy<Value = Facts> {
    (
        prop::collection::vec((0u32..12, 0usize..10), NUMBER_FACTS.len()),
        any::<[bool; 2]>(),
        prop::collection::vec(any::<bool>(), TAGS.len()),
    )
        .prop_map(|(numbers, [moving, charging], tags)| {
            let mut f = Facts::new();
            for (fact, (n, u)) in NUMBER_FACTS.iter().zip(numbers) {
                let units = units_of(fact);
                f.set(fact, f64::from(n) * scale(units[u % units.len()]));
            }
            f.set_flag("moving", moving).set_flag("charging", charging);
            for (tag, has) in TAGS.iter().zip(tags) {
                if has {
                    f.add_tag(tag);
                }
            }
            f
        })
}

/// Pieces of the language (and near misses) for noisy sources.
const PIECES: &[&str] = &[
    "battery",
    "free_disk",
    "uptime",
    "moving",
    "charging",
    "has",
    "has(gps)",
    "true",
    "false",
    "batery",
    "(",
    ")",
    "!",
    "&&",
    "||",
    "&",
    "|",
    "=",
    "==",
    ">=",
    "<",
    "!=",
    "50",
    "1.5",
    "1GB",
    "2GiB",
    "%",
    "min",
    "GX",
    ".",
    "-",
    ",",
    " ",
    " ",
    "\t",
    "\n",
    "é",
    "\"",
    "and",
    "0",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn canonical_form_round_trips(t in tree(), spaced in any::<bool>(), seed in any::<u64>()) {
        let mut state = seed;
        let mut extra = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 60) == 0
        };
        let src = print(&t, spaced, &mut extra);
        prop_assume!(src.len() <= MAX_SOURCE_LEN);
        let first = Requirement::parse(&src)
            .map_err(|e| TestCaseError::fail(format!("{src:?}:\n{}", e.render(&src))))?;
        prop_assert_eq!(first.source(), src.as_str());
        let canonical = first.to_string();
        prop_assume!(canonical.len() <= MAX_SOURCE_LEN);
        let second = Requirement::parse(&canonical)
            .map_err(|e| TestCaseError::fail(format!("{canonical:?}:\n{}", e.render(&canonical))))?;
        prop_assert_eq!(&second, &first, "{} -> {}", src, canonical);
        prop_assert_eq!(second.to_string(), canonical);
    }

    #[test]
    fn check_agrees_with_a_reference_evaluator(t in tree(), f in facts(), spaced in any::<bool>()) {
        let src = print(&t, spaced, &mut || false);
        prop_assume!(src.len() <= MAX_SOURCE_LEN);
        let r = Requirement::parse(&src).map_err(|e| TestCaseError::fail(e.render(&src)))?;
        let verdict = r.check(&f);
        prop_assert_eq!(verdict.is_pass(), truth(&t, &f), "{} gave {:?}", src, verdict);
        // Deterministic, and the canonical form decides the same.
        prop_assert_eq!(r.check(&f), verdict.clone());
        prop_assert_eq!(parse(&r.to_string()).check(&f), verdict);
    }

    #[test]
    fn any_text_parses_or_fails_cleanly(src in any::<String>()) {
        check_cleanly(&src)?;
    }

    #[test]
    fn noisy_sources_parse_or_fail_cleanly(
        pieces in prop::collection::vec(prop::sample::select(PIECES), 0..60)
    ) {
        check_cleanly(&pieces.concat())?;
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check_cleanly(&String::from_utf8_lossy(&bytes))?;
    }
}

/// No panic; an error points into the source at a character; a requirement re-parses from its
/// canonical form and can be checked.
fn check_cleanly(src: &str) -> Result<(), TestCaseError> {
    match Requirement::parse(src) {
        Err(e) => {
            prop_assert!(e.offset <= src.len() && src.is_char_boundary(e.offset));
            prop_assert!(!e.message.is_empty());
            let rendered = e.render(src);
            prop_assert!(rendered.contains('^'));
        }
        Ok(r) => {
            let canonical = r.to_string();
            if canonical.len() <= MAX_SOURCE_LEN {
                prop_assert_eq!(&parse(&canonical), &r);
            }
            let _ = r.check(&Facts::new());
            let _ = r.check(&phone());
        }
    }
    Ok(())
}
