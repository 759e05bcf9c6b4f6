//! Counts in the steps' log lines, in English: `1 file`, `3 files`.

/// `count` and `noun`, the noun in the plural (with `s`) unless the count is one.
pub(crate) fn count(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "file"), "1 file");
        assert_eq!(count(0, "file"), "0 files");
        assert_eq!(count(3, "file"), "3 files");
    }
}
