//! Test names made safe to print, and durations read as integers.

use std::fmt::Write as _;

/// `raw` with every character a terminal would act on instead of print shown visibly (the same
/// policy as `worker explain`'s output: ESC as `\e`, CR `\r`, LF `\n`, TAB `\t`, other C0 and DEL
/// as `\xNN`, C1 controls and the bidirectional marks, overrides and isolates as `\u{NNNN}`),
/// then cut to at most `max_bytes` at a character boundary. Returns the name and whether it was
/// cut. A test name comes from solver-controlled output; once through here it cannot move the
/// cursor, retitle the window or reorder what is shown around it.
pub fn safe_name(raw: &str, max_bytes: usize) -> (String, bool) {
    let mut out = String::with_capacity(raw.len().min(max_bytes));
    let mut piece = String::new();
    for c in raw.chars() {
        piece.clear();
        match c {
            '\u{1b}' => piece.push_str("\\e"),
            '\r' => piece.push_str("\\r"),
            '\n' => piece.push_str("\\n"),
            '\t' => piece.push_str("\\t"),
            '\0'..='\u{1f}' | '\u{7f}' => {
                let _ = write!(piece, "\\x{:02x}", u32::from(c));
            }
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => {
                let _ = write!(piece, "\\u{{{:04x}}}", u32::from(c));
            }
            _ => piece.push(c),
        }
        if out.len().saturating_add(piece.len()) > max_bytes {
            return (out, true);
        }
        out.push_str(&piece);
    }
    (out, false)
}

/// A non-negative decimal (`12`, `0.020`, `.5`) in units of 10^-`exponent` of a microsecond's
/// parent unit: `exponent` 6 reads seconds, 3 reads milliseconds. `None` for anything else
/// (signs, exponents, several dots, over 20 integer digits, overflow). Digits past microsecond
/// precision are dropped. Parsed by hand so no float ever enters a record.
pub(crate) fn decimal_to_micros(text: &str, exponent: u32) -> Option<u64> {
    let (whole, fraction) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    if (whole.is_empty() && fraction.is_empty())
        || whole.len() > 20
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = 10u64.checked_pow(exponent)?;
    let mut micros = if whole.is_empty() {
        0
    } else {
        whole.parse::<u64>().ok()?.checked_mul(scale)?
    };
    let mut place = scale;
    for digit in fraction.bytes().take(usize::try_from(exponent).ok()?) {
        place /= 10;
        micros = micros.checked_add(u64::from(digit - b'0').checked_mul(place)?)?;
    }
    Some(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_in_names_are_shown_not_acted_on() {
        let (name, cut) = safe_name("t\u{1b}[2K\r\u{9b}31m\u{202e}x\ty\n", 100);
        assert_eq!(name, "t\\e[2K\\r\\u{009b}31m\\u{202e}x\\ty\\n");
        assert!(!cut);
    }

    #[test]
    fn names_are_cut_at_a_character_boundary() {
        let (name, cut) = safe_name("ab\u{1b}cd", 4);
        assert_eq!(name, "ab\\e");
        assert!(cut);
        let (name, cut) = safe_name("aéé", 4);
        assert_eq!(name, "aé");
        assert!(cut);
    }

    #[test]
    fn decimals_become_microseconds_without_floats() {
        assert_eq!(decimal_to_micros("0.02", 6), Some(20_000));
        assert_eq!(decimal_to_micros("1.170092", 3), Some(1_170));
        assert_eq!(decimal_to_micros("3", 6), Some(3_000_000));
        assert_eq!(decimal_to_micros(".5", 6), Some(500_000));
        assert_eq!(decimal_to_micros("0.1234567", 6), Some(123_456));
        assert_eq!(decimal_to_micros("", 6), None);
        assert_eq!(decimal_to_micros(".", 6), None);
        assert_eq!(decimal_to_micros("-1", 6), None);
        assert_eq!(decimal_to_micros("1e3", 6), None);
        assert_eq!(decimal_to_micros("1.2.3", 6), None);
        assert_eq!(decimal_to_micros("99999999999999999999", 6), None);
    }
}
