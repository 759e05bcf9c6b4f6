//! A small tokenizer for expr-lang source: identifiers, literals and punctuation with their
//! byte offsets. expr-lang's own parser does not expose its syntax tree, so the apply-time
//! checks (`check.rs`), the nesting limit and the `.Major()` rewrite (`engine.rs`) read
//! tokens instead. It never fails: malformed input yields tokens the real parser refuses.

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// What it is.
    pub(crate) kind: TokenKind,
    /// Its text as written.
    pub(crate) text: String,
    /// Byte offset of its first character.
    pub(crate) offset: usize,
}

/// The kinds of token the checks tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A name: a variable, function, field, keyword, `#`, `#index` or `$env`.
    Ident,
    /// A number or string literal.
    Literal,
    /// An operator or bracket, e.g. `(`, `?.`, `??`, `&&`.
    Punct,
}

const TWO_CHAR: [&str; 11] = [
    "?.", "??", "..", "&&", "||", "==", "!=", "<=", ">=", "**", "|>",
];

/// The tokens of `source`, comments and whitespace dropped.
pub(crate) fn tokenize(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if source[i..].starts_with("//") {
            i = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
            continue;
        }
        if source[i..].starts_with("/*") {
            i = source[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            continue;
        }
        let kind = if c == b'"' || c == b'\'' || c == b'`' {
            i = skip_string(bytes, i);
            TokenKind::Literal
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i += 1;
            while i < bytes.len() {
                let d = bytes[i];
                let exponent_sign = (d == b'+' || d == b'-')
                    && matches!(bytes[i - 1], b'e' | b'E')
                    && !source[start..i].starts_with("0x");
                let fraction = d == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
                if d.is_ascii_alphanumeric() || d == b'_' || exponent_sign || fraction {
                    i += 1;
                } else {
                    break;
                }
            }
            TokenKind::Literal
        } else if is_ident_start(c) {
            i += 1;
            while i < bytes.len() && is_ident_char(bytes[i]) {
                i += 1;
            }
            // b"…": a bytes literal
            if &source[start..i] == "b" && matches!(bytes.get(i), Some(b'"' | b'\'')) {
                i = skip_string(bytes, i);
                TokenKind::Literal
            } else {
                TokenKind::Ident
            }
        } else {
            let two = source.get(i..i + 2);
            if two.is_some_and(|two| TWO_CHAR.contains(&two)) {
                i += 2;
            } else {
                i += source[i..].chars().next().map_or(1, char::len_utf8);
            }
            TokenKind::Punct
        };
        tokens.push(Token {
            kind,
            text: source[start..i].to_owned(),
            offset: start,
        });
    }
    tokens
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'#' || c >= 0x80
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The offset just past the string literal opening at `i`.
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let quote = bytes[i];
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' if quote != b'`' => j += 2,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// The deepest bracket nesting in `tokens` and where it is first reached past `max`.
pub(crate) fn too_deep(tokens: &[Token], max: usize) -> Option<usize> {
    let mut depth = 0usize;
    for token in tokens.iter().filter(|t| t.kind == TokenKind::Punct) {
        match token.text.as_str() {
            "(" | "[" | "{" => {
                depth += 1;
                if depth > max {
                    return Some(token.offset);
                }
            }
            ")" | "]" | "}" => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(source: &str) -> Vec<String> {
        tokenize(source).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn tokens_keep_text_and_offsets() {
        assert_eq!(
            texts("commitFrom(vars.gitRepo).ID[0:7]"),
            [
                "commitFrom",
                "(",
                "vars",
                ".",
                "gitRepo",
                ")",
                ".",
                "ID",
                "[",
                "0",
                ":",
                "7",
                "]"
            ]
        );
        let tokens = tokenize("a ?? 'x\\'y' // c\n + 1.5e-3");
        assert_eq!(tokens[1].text, "??");
        assert_eq!(tokens[2].text, "'x\\'y'");
        assert_eq!(tokens[2].kind, TokenKind::Literal);
        assert_eq!(tokens[3].text, "+");
        assert_eq!(tokens[4].text, "1.5e-3");
        assert_eq!(tokens[4].offset, 20);
    }

    #[test]
    fn malformed_input_still_tokenizes() {
        for source in ["'unterminated", "/* open", "`raw", "é€", "\\", "#", "b'"] {
            let _ = tokenize(source);
        }
    }

    #[test]
    fn nesting_is_measured() {
        assert_eq!(too_deep(&tokenize("((1))"), 2), None);
        assert_eq!(too_deep(&tokenize("((1))"), 1), Some(1));
        assert_eq!(too_deep(&tokenize("'((('"), 1), None);
    }
}
