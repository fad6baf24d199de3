//! A byte-level JSON nesting scan, run before parsing so hostile input can never drive the
//! parser's recursion (serde_json stops at 128; we stop far earlier).

/// Returns the first nesting depth that exceeds `max_depth`, or `None` when the document
/// stays within it. Brackets inside strings (including after escaped quotes) do not count;
/// the scan does not validate the JSON, the parser does that afterwards.
pub fn exceeds_depth(bytes: &[u8], max_depth: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Some(depth);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::exceeds_depth;

    fn nested(n: usize) -> String {
        format!("{}{}", "[".repeat(n), "]".repeat(n))
    }

    #[test]
    fn depth_limit_edges() {
        assert_eq!(exceeds_depth(nested(64).as_bytes(), 64), None);
        assert_eq!(exceeds_depth(nested(65).as_bytes(), 64), Some(65));
        assert_eq!(exceeds_depth(b"{\"a\":{\"b\":[1,{}]}}", 4), None);
        assert_eq!(exceeds_depth(b"{\"a\":{\"b\":[1,{}]}}", 3), Some(4));
        // Sequential siblings do not accumulate depth.
        assert_eq!(exceeds_depth("[[],[],[]]".repeat(100).as_bytes(), 2), None);
    }

    #[test]
    fn brackets_inside_strings_and_escapes_do_not_count() {
        let s = format!("[\"{}\"]", "[{".repeat(500));
        assert_eq!(exceeds_depth(s.as_bytes(), 1), None);
        // An escaped quote does not end the string, so the brackets after it stay quoted.
        let s = r#"["a\"[[[[", "b\\", [1]]"#;
        assert_eq!(exceeds_depth(s.as_bytes(), 2), None);
        assert_eq!(exceeds_depth(s.as_bytes(), 1), Some(2));
    }
}
