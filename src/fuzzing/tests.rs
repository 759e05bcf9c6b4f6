//! What CI runs of the fuzzing targets: hostile inputs named one by one, then each target
//! over a bounded number of inputs generated and mutated from its seed corpus
//! (`fuzz/corpus/<target>/`), with a fixed seed so a failure reproduces
//! (`DRAY_FUZZ_SEED=<n>` explores others; `DRAY_FUZZ_CASES=<n>` runs more).

use std::path::Path;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, RngSeed, TestRunner};

use super::TARGETS;

/// Inputs per target in `cargo test`: a few seconds each on CI's two cores.
const CASES: u32 = 1500;

/// The seed inputs of `target`, from `fuzz/corpus/<target>/` (every file).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus `{}`: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.expect("corpus entry").path()).expect("corpus file"))
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "the corpus `{}` is empty", dir.display());
    seeds
}

/// Bytes that mean something to one parser or another.
const TOKENS: &[&[u8]] = &[
    b"${{",
    b"}}",
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b"'",
    b"\"",
    b"'''",
    b"\\",
    b": ",
    b"- ",
    b"\n",
    b"\n  ",
    b"\t",
    b"&a ",
    b"*a",
    b"!!str ",
    b"? ",
    b"---\n",
    b"#",
    b",",
    b".",
    b"||",
    b">=",
    b"^",
    b"~",
    b"@sha256:",
    b"/",
    b"..",
    b"@{",
    b"-1",
    b"9223372036854775807",
    b"18446744073709551616",
    b"1e308",
    b"0x",
    b"u",
    b"\xff",
    b"\xc3",
    b"\0",
    b"null",
    b"true",
    b"vars.",
    b"outputs.",
    b"ctx.",
    b".map(x, ",
    b".exists(x, ",
    b"size(",
    b"imageFrom(",
    b"quote(",
    b"status(",
    b"int(",
    b"double(",
    b"string(",
    b"+",
    b"*",
    b"%",
    b"/",
    b"?",
    b"regex:",
    b"glob:",
    b"**",
    b"refs/heads/",
];

/// One edit of a seed.
#[derive(Clone, Debug)]
enum Edit {
    Insert(Index, &'static [u8]),
    InsertByte(Index, u8),
    Delete(Index, usize),
    Duplicate(Index, usize),
    Replace(Index, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), select(TOKENS)).prop_map(|(at, t)| Edit::Insert(at, t)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Edit::InsertByte(at, b)),
        (any::<Index>(), 1..16usize).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<Index>(), 1..64usize).prop_map(|(at, n)| Edit::Duplicate(at, n)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| Edit::Replace(at, b)),
    ]
}

fn apply(mut data: Vec<u8>, edits: Vec<Edit>) -> Vec<u8> {
    for edit in edits {
        let at = |i: &Index| i.index(data.len() + 1);
        match edit {
            Edit::Insert(i, t) => {
                let at = at(&i);
                data.splice(at..at, t.iter().copied());
            }
            Edit::InsertByte(i, b) => data.insert(at(&i), b),
            Edit::Delete(i, n) => {
                let at = at(&i).min(data.len());
                data.drain(at..(at + n).min(data.len()));
            }
            Edit::Duplicate(i, n) => {
                let at = at(&i).min(data.len());
                let piece = data[at..(at + n).min(data.len())].to_vec();
                data.splice(at..at, piece);
            }
            Edit::Replace(i, b) => {
                if !data.is_empty() {
                    let at = i.index(data.len());
                    data[at] = b;
                }
            }
        }
    }
    data
}

/// Mostly seeds with a few edits, some token soup, some raw bytes.
fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => (select(seeds), vec(edit(), 1..12)).prop_map(|(seed, edits)| apply(seed, edits)),
        2 => vec(select(TOKENS), 0..64).prop_map(|tokens| tokens.concat()),
        1 => vec(any::<u8>(), 0..256),
    ]
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn fuzz(name: &str) {
    let (_, target) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target `{name}`"));
    let config = Config {
        cases: env_number("DRAY_FUZZ_CASES").map_or(CASES, |n| n as u32),
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(env_number("DRAY_FUZZ_SEED").unwrap_or(12)),
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&inputs(corpus(name)), |data| {
        target(&data);
        Ok(())
    });
    if let Err(e) = result {
        panic!("fuzz target `{name}` failed: {e}");
    }
}

#[test]
fn every_target_has_a_fuzz_target_file_and_a_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for (name, _) in TARGETS {
        let file = root.join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.is_file(), "missing {}", file.display());
        assert!(!corpus(name).is_empty());
    }
}

#[test]
fn fuzz_yaml_load() {
    fuzz("yaml_load");
}

#[test]
fn fuzz_template() {
    fuzz("template");
}

#[test]
fn fuzz_cel_eval() {
    fuzz("cel_eval");
}

#[test]
fn fuzz_webhook_payload() {
    fuzz("webhook_payload");
}

#[test]
fn fuzz_image_reference() {
    fuzz("image_reference");
}

#[test]
fn fuzz_git_tags() {
    fuzz("git_tags");
}

#[test]
fn fuzz_step_config() {
    fuzz("step_config");
}

#[test]
fn fuzz_git_ref() {
    fuzz("git_ref");
}

#[test]
fn fuzz_yaml_edit() {
    fuzz("yaml_edit");
}

/// `n` copies of `open`, `middle`, `n` copies of `close`.
fn nested(open: &str, middle: &str, close: &str, n: usize) -> Vec<u8> {
    format!("{}{middle}{}", open.repeat(n), close.repeat(n)).into_bytes()
}

#[test]
fn hostile_inputs_reach_every_target_without_a_panic() {
    let long = "a".repeat(1 << 18);
    let mut hostile: Vec<Vec<u8>> = vec![
        nested("[", "1", "]", 10_000),
        nested("{a: ", "1", "}", 10_000),
        nested("(", "1", ")", 10_000),
        nested("${{ ", "1", " }}", 10_000),
        nested("-", "1", "", 10_000),
        nested("!", "true", "", 10_000),
        b"1".iter()
            .chain(b" + 1".repeat(10_000).iter())
            .copied()
            .collect(),
        b"vars"
            .iter()
            .chain(b".a".repeat(10_000).iter())
            .copied()
            .collect(),
        b"true"
            .iter()
            .chain(b" || true".repeat(10_000).iter())
            .copied()
            .collect(),
        b"true"
            .iter()
            .chain(b" && true".repeat(10_000).iter())
            .copied()
            .collect(),
        b"1".iter()
            .chain(b" == 1".repeat(10_000).iter())
            .copied()
            .collect(),
        b"true"
            .iter()
            .chain(b" ? 1 : true".repeat(10_000).iter())
            .copied()
            .collect(),
        b"[1]"
            .iter()
            .chain(b"[0]".repeat(10_000).iter())
            .copied()
            .collect(),
        b"size"
            .iter()
            .chain(b".size()".repeat(10_000).iter())
            .copied()
            .collect(),
        format!("${{{{ {} }}}}", "${{ 1 }}".repeat(1_000)).into_bytes(),
        "${{ 1 }}".repeat(1_000).into_bytes(),
        long.clone().into_bytes(),
        format!("${{{{ '{long}' }}}}").into_bytes(),
        b"99999999999999999999999999999999999999".to_vec(),
        b"9223372036854775807 + 1".to_vec(),
        b"-9223372036854775808 / -1".to_vec(),
        b"-9223372036854775808 % -1".to_vec(),
        b"1 / 0".to_vec(),
        b"1e999999".to_vec(),
        b"\xff\xfe\xfd{\"a\": \xc3}".to_vec(),
        b"push\n{\"repository\": {\"clone_url\": 1e999999}}".to_vec(),
    ];
    // Indentation 1,000 deep, block style (10,000 would be 50 MB of spaces).
    let mut deep = String::new();
    for i in 0..1_000 {
        deep.push_str(&" ".repeat(i));
        deep.push_str("a:\n");
    }
    hostile.push(deep.into_bytes());
    hostile.push(nested("- ", "1", "", 10_000));
    // "Billion laughs": each level an alias of the one before, ten times.
    let mut laughs = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n".to_owned();
    for level in 1..10 {
        let aliases = vec![format!("*l{}", level - 1); 10].join(", ");
        laughs.push_str(&format!("l{level}: &l{level} [{aliases}]\n"));
    }
    hostile.push(laughs.into_bytes());
    for (name, target) in TARGETS {
        for input in &hostile {
            let shown = String::from_utf8_lossy(&input[..input.len().min(40)]).into_owned();
            let result = std::panic::catch_unwind(|| target(input));
            assert!(result.is_ok(), "{name} panicked on {shown}…");
        }
    }
}
