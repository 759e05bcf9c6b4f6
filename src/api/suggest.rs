//! "Did you mean" and "use one of" hints: the closest candidate by edit distance, and
//! short, backticked lists of what is allowed. Here, at the bottom, so that every layer
//! words them alike: `dray apply`'s checks, the server's not-found answers, the CLI.

/// The candidate closest to `wrong`, if it is close enough to be a likely typo.
///
/// Case differences are free (`repoUrl` → `repoURL`); otherwise the Damerau–Levenshtein
/// distance must be at most a third of the word's length (at least 1, at most 3).
pub fn closest<'a, I>(wrong: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let wrong_lower = wrong.to_lowercase();
    let limit = (wrong.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .filter(|c| *c != wrong)
        .map(|c| {
            (
                strsim::damerau_levenshtein(&wrong_lower, &c.to_lowercase()),
                c,
            )
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, c)| (*distance, *c))
        .map(|(_, c)| c)
}

/// `` `a`, `b`, `c` `` (at most `max` items, then `… (N more)`).
pub fn list<'a, I>(items: I, max: usize) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    let items: Vec<&str> = items.into_iter().collect();
    let mut text = items
        .iter()
        .take(max)
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        text.push_str(&format!(", … ({} more)", items.len() - max));
    }
    text
}

/// A hint for a name that matched nothing: "did you mean `x`?" when one is close, else
/// `fallback` followed by the list of candidates (or `fallback` alone when there are none).
pub fn hint_for<'a, I>(wrong: &str, candidates: I, fallback: &str) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&str> = candidates.into_iter().collect();
    if let Some(best) = closest(wrong, candidates.iter().copied()) {
        return format!("did you mean `{best}`?");
    }
    if candidates.is_empty() {
        fallback.to_owned()
    } else {
        format!("{fallback}, or use one of: {}", list(candidates, 12))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_and_case_slips() {
        let fields = [
            "requestedFreight",
            "promotionTemplate",
            "vars",
            "queuePolicy",
        ];
        assert_eq!(
            closest("requestedFrieght", fields),
            Some("requestedFreight")
        );
        assert_eq!(
            closest("RequestedFreight", fields),
            Some("requestedFreight")
        );
        assert_eq!(closest("var", fields), Some("vars"));
        assert_eq!(closest("colour", fields), None);
        assert_eq!(closest("vars", fields), None);
    }

    #[test]
    fn lists_and_hints() {
        assert_eq!(list(["a", "b", "c"], 2), "`a`, `b`, … (1 more)");
        assert_eq!(
            hint_for("qa", ["dev"], "define a Stage named `qa`"),
            "define a Stage named `qa`, or use one of: `dev`"
        );
        assert_eq!(hint_for("dve", ["dev"], "x"), "did you mean `dev`?");
        assert_eq!(hint_for("qa", [], "define it"), "define it");
    }
}
