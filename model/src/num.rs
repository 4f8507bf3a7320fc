//! Number parsing and formatting exactly as Redis 7.0 does it (`string2ll`, `strtod`, `%.17g`).
//!
//! Redis never uses Rust's number syntax: integers go through its strict `string2ll` (no sign but
//! `-`, no leading zeros, no spaces), floats through C `strtod` (which accepts `inf`, `infinity`,
//! hex floats and, for score ranges, leading whitespace), and doubles are printed with `%.17g`
//! (Redis 7.0; 7.2 switched to a shortest round-trip printer). These functions reproduce them so
//! that the model's replies are byte-equal to real Redis.

/// Longest decimal integer Redis accepts (`LONG_STR_SIZE` is 21, and the check is `slen >= 21`).
const LONG_STR_SIZE: usize = 21;

/// Redis's `string2ll`: a strict decimal `i64` (`0`, or `-?[1-9][0-9]*` without overflow and
/// shorter than 21 bytes). `None` for anything else, including `-0`, `+1`, `007` and `" 1"`.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v: u64 = u64::from(first - b'0');
    for &d in rest {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// The result of [`strtod`]: the value, how many bytes were consumed, and whether C would have
/// set `errno = ERANGE` (overflow to infinity, or a non-zero literal that underflowed to zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strtod {
    /// The parsed value (0 when nothing was consumed).
    pub value: f64,
    /// Bytes of the input consumed, 0 when no number was found.
    pub consumed: usize,
    /// C `strtod` would report `ERANGE`.
    pub range_error: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// C `strtod` as glibc implements it: leading whitespace, an optional sign, then `inf`,
/// `infinity`, `nan`, `nan(...)`, a hex float (`0x1.8p3`) or a decimal float.
pub fn strtod(s: &[u8]) -> Strtod {
    let none = Strtod {
        value: 0.0,
        consumed: 0,
        range_error: false,
    };
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        negative = s[i] == b'-';
        i += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &s[i..];
    if starts_with_ignore_case(rest, b"infinity") {
        return Strtod {
            value: sign * f64::INFINITY,
            consumed: i + 8,
            range_error: false,
        };
    }
    if starts_with_ignore_case(rest, b"inf") {
        return Strtod {
            value: sign * f64::INFINITY,
            consumed: i + 3,
            range_error: false,
        };
    }
    if starts_with_ignore_case(rest, b"nan") {
        let mut end = i + 3;
        if s.get(end) == Some(&b'(') {
            let mut j = end + 1;
            while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_') {
                j += 1;
            }
            if s.get(j) == Some(&b')') {
                end = j + 1;
            }
        }
        let nan = if negative { -f64::NAN } else { f64::NAN };
        return Strtod {
            value: nan,
            consumed: end,
            range_error: false,
        };
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] == b'x' || rest[1] == b'X') {
        if let Some((value, used)) = parse_hex_float(&rest[2..]) {
            let value = sign * value;
            return Strtod {
                value,
                consumed: i + 2 + used,
                range_error: value.is_infinite(),
            };
        }
        // "0x" without hex digits: only the "0" is a number.
        return Strtod {
            value: sign * 0.0,
            consumed: i + 1,
            range_error: false,
        };
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one mantissa digit.
    let mut j = i;
    let mut mantissa_digits = 0;
    let mut nonzero = false;
    while j < s.len() && s[j].is_ascii_digit() {
        nonzero |= s[j] != b'0';
        mantissa_digits += 1;
        j += 1;
    }
    if j < s.len() && s[j] == b'.' {
        let mut k = j + 1;
        let mut frac = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            nonzero |= s[k] != b'0';
            frac += 1;
            k += 1;
        }
        if mantissa_digits + frac > 0 {
            mantissa_digits += frac;
            j = k;
        }
    }
    if mantissa_digits == 0 {
        return none;
    }
    if j < s.len() && (s[j] == b'e' || s[j] == b'E') {
        let mut k = j + 1;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            k += 1;
        }
        let digits_start = k;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
        }
        if k > digits_start {
            j = k;
        }
    }
    let digits = &s[i..j];
    let magnitude: f64 = if digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        // A plain integer below 10^15 is exact as a double: the common case (times, scores).
        digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64
    } else {
        let text = std::str::from_utf8(digits).expect("ASCII digits");
        // Rust parses "5.", ".5" and huge exponents the way strtod does (correctly rounded).
        normalise_decimal(text).parse().unwrap_or(0.0)
    };
    let value = sign * magnitude;
    let range_error = magnitude.is_infinite() || (magnitude == 0.0 && nonzero);
    Strtod {
        value,
        consumed: j,
        range_error,
    }
}

/// Rust's float parser rejects an exponent with more digits than fit an i64 in some versions;
/// clamp such exponents (the value is 0 or infinity either way).
fn normalise_decimal(text: &str) -> std::borrow::Cow<'_, str> {
    match text.find(['e', 'E']) {
        Some(pos) if text.len() - pos > 12 => {
            let (mantissa, exp) = text.split_at(pos);
            let exp = &exp[1..];
            let negative = exp.starts_with('-');
            let digits = exp.trim_start_matches(['+', '-']).trim_start_matches('0');
            if digits.len() > 9 {
                let clamped = if negative { "-999999999" } else { "999999999" };
                return format!("{mantissa}e{clamped}").into();
            }
            text.into()
        }
        _ => text.into(),
    }
}

/// Parse the part of a hex float after `0x`: hex digits with an optional point, then an optional
/// binary exponent `p[+-]digits`. Returns (value, bytes used) or None without any hex digit.
fn parse_hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut mantissa: u64 = 0;
    let mut exp2: i64 = 0;
    let mut digits = 0;
    let mut i = 0;
    let mut saw_point = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !saw_point {
            saw_point = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        digits += 1;
        if mantissa >> 56 == 0 {
            mantissa = mantissa * 16 + u64::from(d);
            if saw_point {
                exp2 -= 4;
            }
        } else if !saw_point {
            exp2 += 4;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() && (s[i] == b'p' || s[i] == b'P') {
        let mut k = i + 1;
        let mut negative = false;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            negative = s[k] == b'-';
            k += 1;
        }
        let start = k;
        let mut e: i64 = 0;
        while k < s.len() && s[k].is_ascii_digit() {
            e = (e * 10 + i64::from(s[k] - b'0')).min(100_000);
            k += 1;
        }
        if k > start {
            exp2 += if negative { -e } else { e };
            i = k;
        }
    }
    let exp2 = exp2.clamp(-100_000, 100_000) as i32;
    let mut value = mantissa as f64;
    // Scale in steps so that intermediate powers do not overflow or underflow early.
    let mut e = exp2;
    while e > 0 {
        let step = e.min(1000);
        value *= 2f64.powi(step);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        value /= 2f64.powi(step);
        e += step;
    }
    Some((value, i))
}

/// Redis's `string2d` (used for ZADD scores and increments): the whole string must be a float,
/// with no leading space, no overflow, no underflow to zero, and not NaN.
pub fn parse_f64_strict(s: &[u8]) -> Option<f64> {
    if s.is_empty() || is_c_space(s[0]) {
        return None;
    }
    let r = strtod(s);
    if r.consumed != s.len() || r.value.is_nan() {
        return None;
    }
    if r.range_error && (r.value.is_infinite() || r.value == 0.0) {
        return None;
    }
    Some(r.value)
}

/// C `printf("%.17g", x)` as glibc prints it, which is how Redis 7.0 formats doubles in replies
/// (ZSCORE, ZRANGE WITHSCORES) and how it turns a Lua number argument of `redis.call` into a
/// string.
pub fn format_g17(x: f64) -> String {
    format_g(x, 17)
}

/// C `printf("%.<precision>g", x)` (glibc): `inf`, `-nan`, trailing zeros removed.
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let p = precision.max(1);
    // An integral value with at most p digits prints as that integer (the common case: times,
    // counters and indexes passed to `redis.call` as Lua numbers), without the general path's
    // allocations.
    if p <= 17 && x.fract() == 0.0 && x.abs() < 10f64.powi(p as i32) {
        return (x as i64).to_string();
    }
    format_g_digits(x, p)
}

/// [`format_g`] for a finite, non-zero `x` and `p >= 1`, through the correctly rounded
/// scientific form.
fn format_g_digits(x: f64, p: usize) -> String {
    // d.ddddde±X with p significant digits, correctly rounded.
    let sci = format!("{:.*e}", p - 1, x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x < 0.0 { "-" } else { "" };
    if exp < -4 || exp >= p as i32 {
        let mut m = String::new();
        m.push_str(&digits[..1]);
        let frac = digits[1..].trim_end_matches('0');
        if !frac.is_empty() {
            m.push('.');
            m.push_str(frac);
        }
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    } else {
        let point = exp + 1; // digits before the decimal point (may be <= 0)
        let mut s = String::new();
        if point <= 0 {
            s.push_str("0.");
            for _ in 0..(-point) {
                s.push('0');
            }
            s.push_str(&digits);
        } else {
            let point = point as usize;
            s.push_str(&digits[..point]);
            s.push('.');
            s.push_str(&digits[point..]);
        }
        if s.contains('.') {
            let trimmed = s.trim_end_matches('0').trim_end_matches('.');
            s = trimmed.to_string();
        }
        format!("{sign}{s}")
    }
}

/// C's `(long long)x` on x86-64 (`cvttsd2si`): truncation toward zero, and the "integer
/// indefinite" value `i64::MIN` for NaN and anything outside the `i64` range. Redis converts a
/// Lua number returned by a script this way.
pub fn c_double_to_i64(x: f64) -> i64 {
    // 2^63 is exactly representable; anything >= it or < -2^63 is out of range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-LIMIT..LIMIT).contains(&x) {
        i64::MIN
    } else {
        x.trunc() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the integer shortcut of format_g prints what the general path prints.
    #[test]
    fn format_g_integer_shortcut_matches_the_general_path() {
        let values = [
            1.0,
            -1.0,
            7.0,
            100.0,
            1_796_176_578_735.0,
            -1_796_176_578_735.0,
            9_007_199_254_740_993.0, // 2^53 + 1, rounds to 2^53
            12_345_678_901_234_567.0,
            99_999_999_999_999_990.0,
            -99_999_999_999_999_990.0,
        ];
        for x in values {
            for p in [1, 6, 14, 15, 17] {
                assert_eq!(format_g(x, p), format_g_digits(x, p), "{x} at %.{p}g");
            }
        }
        assert_eq!(format_g17(1_796_176_578_735.0), "1796176578735");
        assert_eq!(format_g17(1e17), "1e+17");
        assert_eq!(format_g(123.0, 2), "1.2e+02");
    }

    // Goal: string2ll accepts exactly the canonical decimal integers of i64.
    #[test]
    fn parse_i64_is_redis_string2ll() {
        for (s, v) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-0", None),
            ("+1", None),
            ("01", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("1.0", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s:?}");
        }
    }

    // Goal: %.17g output equals glibc's for the shapes Redis prints.
    #[test]
    fn format_g17_matches_glibc() {
        for (x, s) in [
            (0.1, "0.10000000000000001"),
            (1.0, "1"),
            (-0.0, "-0"),
            (1e20, "1e+20"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (2.5, "2.5"),
            (-3.75, "-3.75"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1099511627776.0 * 9.0 + 5.0, "9895604649989"),
            (1.5e-300, "1.5000000000000001e-300"),
        ] {
            assert_eq!(format_g17(x), s, "{x:e}");
        }
        assert_eq!(format_g(1e15, 14), "1e+15");
        assert_eq!(format_g(2f64.powi(53), 14), "9.007199254741e+15");
    }

    // Goal: strtod and string2d accept and reject what glibc and Redis do.
    #[test]
    fn strtod_and_strict_float_parsing() {
        assert_eq!(parse_f64_strict(b"1.5"), Some(1.5));
        assert_eq!(parse_f64_strict(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64_strict(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64_strict(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64_strict(b"0x10"), Some(16.0));
        assert_eq!(parse_f64_strict(b"0x1p-2"), Some(0.25));
        assert_eq!(parse_f64_strict(b"1e400"), None);
        assert_eq!(parse_f64_strict(b"1e-400"), None);
        assert_eq!(parse_f64_strict(b"0e-400"), Some(0.0));
        assert_eq!(parse_f64_strict(b"nan"), None);
        assert_eq!(parse_f64_strict(b" 1"), None);
        assert_eq!(parse_f64_strict(b"1 "), None);
        assert_eq!(parse_f64_strict(b""), None);
        assert_eq!(parse_f64_strict(b"."), None);
        assert_eq!(parse_f64_strict(b"5."), Some(5.0));
        assert_eq!(parse_f64_strict(b".5"), Some(0.5));
        assert_eq!(parse_f64_strict(b"1e"), None);
        let r = strtod(b"  12abc");
        assert_eq!((r.value, r.consumed), (12.0, 4));
        assert_eq!(strtod(b"").consumed, 0);
        assert_eq!(strtod(b"0x").consumed, 1);
        assert_eq!(strtod(b"1e+").consumed, 1);
        // The plain-integer shortcut and the general path agree.
        for text in [
            "0",
            "007",
            "1796176578735",
            "999999999999999",
            "1000000000000000",
        ] {
            let general: f64 = text.parse().unwrap();
            assert_eq!(strtod(text.as_bytes()).value, general, "{text}");
        }
        assert!(strtod(b"-0").value.is_sign_negative());
    }

    // Goal: the C cast Redis applies to Lua numbers, including its x86 out-of-range value.
    #[test]
    fn c_cast_truncates_and_saturates_like_x86() {
        assert_eq!(c_double_to_i64(3.99), 3);
        assert_eq!(c_double_to_i64(-3.99), -3);
        assert_eq!(c_double_to_i64(f64::INFINITY), i64::MIN);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_double_to_i64(9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(c_double_to_i64(-9_223_372_036_854_775_808.0), i64::MIN);
    }
}
