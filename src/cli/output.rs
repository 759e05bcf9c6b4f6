//! Printing resources: aligned tables for people, YAML and JSON for programs; colour only
//! on a terminal (and never with `NO_COLOR`).

use std::io::IsTerminal;

use serde_json::Value;

/// An output format chosen with `-o`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// An aligned table.
    #[default]
    Table,
    /// YAML documents.
    Yaml,
    /// JSON.
    Json,
}

/// Whether to colour what goes to standard error.
pub fn stderr_is_colourful() -> bool {
    std::env::var_os(super::env::NO_COLOR).is_none() && std::io::stderr().is_terminal()
}

/// Paints `text` with an ANSI style when colour is on.
pub fn paint(text: &str, ansi: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{ansi}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// How many characters of a Freight id the CLI shows (as `dray get freight` does).
pub const SHORT_ID: usize = 12;

/// The first [`SHORT_ID`] characters of a Freight id.
pub fn short_id(id: &str) -> &str {
    match id.char_indices().nth(SHORT_ID) {
        Some((at, _)) => &id[..at],
        None => id,
    }
}

/// Freight as the CLI shows it everywhere: `fresh-otter (3f2a9c1b7d0e)`; the short id
/// alone when the alias is unknown, `-` when there is no Freight.
pub fn freight_label(alias: Option<&str>, id: Option<&str>) -> String {
    let alias = alias.filter(|a| !a.is_empty() && *a != "-");
    match (alias, id.filter(|i| !i.is_empty() && *i != "-")) {
        (Some(alias), Some(id)) => format!("{alias} ({})", short_id(id)),
        (Some(alias), None) => alias.to_owned(),
        (None, Some(id)) => short_id(id).to_owned(),
        (None, None) => "-".to_owned(),
    }
}

/// Renders rows under a header as an aligned table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] - cell.chars().count() + 3;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row.clone());
    }
    out
}

/// Renders values as YAML documents separated by `---`.
pub fn yaml(values: &[Value]) -> Result<String, super::CliError> {
    let mut out = String::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        let text = serde_yaml_ng::to_string(value)
            .map_err(|e| super::CliError::Local(format!("cannot render YAML: {e}")))?;
        out.push_str(&text);
    }
    Ok(out)
}

/// Renders `items` as one pretty JSON array, ending in a newline.
pub fn json<T: serde::Serialize>(items: &[T]) -> Result<String, super::CliError> {
    let mut text = serde_json::to_string_pretty(items)
        .map_err(|e| super::CliError::Local(format!("cannot render JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}

/// Renders `items` as YAML documents separated by `---` (see [`yaml`]).
pub fn yaml_of<T: serde::Serialize>(items: &[T]) -> Result<String, super::CliError> {
    let values: Vec<Value> = items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()
        .map_err(|e| super::CliError::Local(format!("cannot render YAML: {e}")))?;
    yaml(&values)
}

/// How long ago an RFC 3339 timestamp was, in the short form `kubectl` uses (`5m`, `3h`, `2d`).
pub fn age(timestamp: Option<&str>) -> String {
    let Some(then) = timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "-".into();
    };
    let seconds = (jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let text = table(
            &["NAME", "AGE"],
            &[
                vec!["dev".into(), "5m".into()],
                vec!["staging".into(), "1h".into()],
            ],
        );
        assert_eq!(text, "NAME      AGE\ndev       5m\nstaging   1h\n");
    }

    #[test]
    fn freight_is_shown_as_alias_and_short_id() {
        let id = "3f2a9c1b7d0e5566778899";
        assert_eq!(
            freight_label(Some("fresh-otter"), Some(id)),
            "fresh-otter (3f2a9c1b7d0e)"
        );
        assert_eq!(freight_label(None, Some(id)), "3f2a9c1b7d0e");
        assert_eq!(freight_label(Some(""), None), "-");
    }

    #[test]
    fn age_is_short() {
        assert_eq!(age(None), "-");
        assert_eq!(age(Some("not a time")), "-");
        let hour_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3 * 3600);
        assert_eq!(age(Some(&hour_ago.to_string())), "3h");
    }
}
