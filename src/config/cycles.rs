//! Cycle detection in a project's stage graph (each Stage points at its upstream Stages).
//! Iterative, so that a long chain of stages cannot overflow the stack.

use std::collections::{BTreeMap, BTreeSet};

/// One cycle per group of stages that feed each other, each written in the direction
/// Freight flows and starting with its alphabetically first stage: `["dev", "staging"]`
/// means dev → staging → dev.
pub(crate) fn find_cycles(upstreams: &BTreeMap<&str, Vec<&str>>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Color {
        Unvisited,
        OnPath,
        Done,
    }
    let mut color: BTreeMap<&str, Color> =
        upstreams.keys().map(|k| (*k, Color::Unvisited)).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    let mut seen: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
    for start in upstreams.keys() {
        if color.get(start) != Some(&Color::Unvisited) {
            continue;
        }
        color.insert(start, Color::OnPath);
        let mut path: Vec<(&str, usize)> = vec![(start, 0)];
        while let Some((node, next)) = path.last_mut() {
            let edges = upstreams.get(*node).map(Vec::as_slice).unwrap_or_default();
            let Some(up) = edges.get(*next).copied() else {
                color.insert(node, Color::Done);
                path.pop();
                continue;
            };
            *next += 1;
            match color.get(up) {
                Some(Color::Unvisited) => {
                    color.insert(up, Color::OnPath);
                    path.push((up, 0));
                }
                Some(Color::OnPath) => {
                    let from = path.iter().position(|(n, _)| *n == up).unwrap_or(0);
                    let against_flow: Vec<&str> = path[from..].iter().map(|(n, _)| *n).collect();
                    if seen.insert(against_flow.iter().copied().collect()) {
                        cycles.push(in_flow_order(&against_flow));
                    }
                }
                Some(Color::Done) | None => {}
            }
        }
    }
    cycles
}

/// Reverses a cycle found by following upstream edges and rotates it to start at its
/// smallest name.
fn in_flow_order(against_flow: &[&str]) -> Vec<String> {
    let mut flow: Vec<String> = against_flow.iter().rev().map(|s| (*s).to_owned()).collect();
    if let Some(first) = flow
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.cmp(b.1))
        .map(|(i, _)| i)
    {
        flow.rotate_left(first);
    }
    flow
}

/// `dev -> staging -> dev`.
pub(crate) fn show(cycle: &[String]) -> String {
    let mut text = cycle.join(" -> ");
    if let Some(first) = cycle.first() {
        text.push_str(" -> ");
        text.push_str(first);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph<'a>(edges: &[(&'a str, &[&'a str])]) -> BTreeMap<&'a str, Vec<&'a str>> {
        edges.iter().map(|(n, ups)| (*n, ups.to_vec())).collect()
    }

    #[test]
    fn a_pipeline_has_no_cycle() {
        let g = graph(&[
            ("dev", &[]),
            ("staging", &["dev"]),
            ("prod", &["staging", "dev", "missing"]),
        ]);
        assert!(find_cycles(&g).is_empty());
    }

    #[test]
    fn finds_cycles_in_flow_order() {
        // prod takes from staging, staging from dev, dev from prod: dev -> staging -> prod -> dev.
        let g = graph(&[
            ("dev", &["prod"]),
            ("staging", &["dev"]),
            ("prod", &["staging"]),
            ("qa", &["qa"]),
        ]);
        let cycles = find_cycles(&g);
        assert_eq!(cycles, vec![vec!["dev", "staging", "prod"], vec!["qa"]]);
        assert_eq!(show(&cycles[0]), "dev -> staging -> prod -> dev");
        assert_eq!(show(&cycles[1]), "qa -> qa");
    }

    #[test]
    fn survives_a_long_chain() {
        let names: Vec<String> = (0..100_000).map(|i| format!("s{i}")).collect();
        let mut g: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            g.insert(
                name,
                if i > 0 {
                    vec![names[i - 1].as_str()]
                } else {
                    vec![names[99_999].as_str()]
                },
            );
        }
        assert_eq!(find_cycles(&g).len(), 1);
    }
}
