//! The lexer behind [`super::classify`]: words, punctuation and the
//! places where quotes, dollar quotes and comments end, over raw bytes.

/// One token; positions index into the SQL text so that nothing is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Tok {
    /// Unquoted identifier or keyword at `[start, end)`.
    Word(usize, usize),
    /// Quoted identifier; `[start, end)` lies between the quotes, `""` still doubled.
    Quoted(usize, usize),
    /// String literal: its contents never matter.
    Str,
    /// Contents of a dollar quote at `[start, end)`: may be code, so it is scanned too.
    Body(usize, usize),
    /// One byte of punctuation or operator.
    Punct(u8),
    /// Number, `$n` placeholder, or nothing at all (before the first token).
    #[default]
    Other,
}

/// Byte classes as PostgreSQL's scanner reads them, one lookup per byte:
/// every query in transaction pooling is lexed, byte by byte.
const SPACE: u8 = 1;
/// A letter, `_` or any byte of a multi-byte character.
const IDENT_START: u8 = 2;
const DIGIT: u8 = 4;
const DOLLAR: u8 = 8;

// A `static`, not a `const`: a const array indexed at run time is copied
// onto the stack at every use (256 bytes per byte lexed).
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            SPACE
        } else if letter(c) {
            IDENT_START
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b'$' {
            DOLLAR
        } else {
            0
        };
        b += 1;
    }
    t
};

/// A byte that starts a word: a letter, `_` or any byte of a multi-byte
/// character (for the tables, which are built at compile time).
pub(super) const fn letter(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

#[inline]
fn class(b: u8) -> u8 {
    CLASS[b as usize]
}

pub(super) fn is_ident_start(b: u8) -> bool {
    class(b) & IDENT_START != 0
}

pub(super) fn is_ident_cont(b: u8) -> bool {
    class(b) & (IDENT_START | DIGIT | DOLLAR) != 0
}

/// Dollar-quote tags and words inside bodies: identifier characters without `$`.
pub(super) fn is_tag_char(b: u8) -> bool {
    class(b) & (IDENT_START | DIGIT) != 0
}

/// PostgreSQL's whitespace, which includes form feed and vertical tab.
pub(super) fn is_space(b: u8) -> bool {
    class(b) & SPACE != 0
}

pub(super) fn skip_while(s: &[u8], mut i: usize, f: impl Fn(u8) -> bool) -> usize {
    while s.get(i).is_some_and(|&c| f(c)) {
        i += 1;
    }
    i
}

/// Keyword test: only unquoted words are keywords.
pub(super) fn is_kw(sql: &[u8], t: Tok, kw: &[u8]) -> bool {
    matches!(t, Tok::Word(s, e) if sql.get(s..e).is_some_and(|w| w.eq_ignore_ascii_case(kw)))
}

/// Name test for quoted or unquoted identifiers; case-blind because being wrong only pins.
pub(super) fn ident_is(sql: &[u8], t: Tok, name: &[u8]) -> bool {
    match t {
        Tok::Word(s, e) | Tok::Quoted(s, e) => {
            sql.get(s..e).is_some_and(|w| w.eq_ignore_ascii_case(name))
        }
        _ => false,
    }
}

/// Splits SQL into tokens as PostgreSQL's scanner (src/backend/parser/scan.l)
/// does, skipping whitespace and comments. Every step consumes at least one
/// byte, and anything unterminated runs to the end (and is noted).
pub(super) struct Lexer<'a> {
    pub(super) s: &'a [u8],
    pub(super) pos: usize,
    /// standard_conforming_strings: a backslash in `'...'` is an ordinary
    /// character; off, it escapes the next one as in `E'...'`.
    pub(super) standard: bool,
    /// The text ended inside a quote, a comment or a dollar quote.
    pub(super) unterminated: bool,
    /// Where the last token returned starts (it ends at `pos`).
    pub(super) start: usize,
    /// A `U&"..."` identifier was read: its escapes are not decoded.
    pub(super) escaped_ident: bool,
}

impl<'a> Lexer<'a> {
    /// A lexer over `s` for a client with standard_conforming_strings `standard`.
    pub(super) fn new(s: &'a [u8], standard: bool) -> Self {
        Lexer {
            s,
            pos: 0,
            standard,
            unterminated: false,
            start: 0,
            escaped_ident: false,
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Tok;

    #[inline]
    fn next(&mut self) -> Option<Tok> {
        self.skip_blanks();
        let start = self.pos;
        self.start = start;
        let b = *self.s.get(start)?;
        self.pos += 1;
        Some(match b {
            b'\'' => self.string(!self.standard),
            b'"' => self.quoted(),
            b'$' => self.dollar(start),
            _ if is_ident_start(b) => self.word(start),
            _ if b.is_ascii_digit() => {
                self.pos = skip_while(self.s, self.pos, |c| c.is_ascii_alphanumeric() || c == b'_');
                Tok::Other
            }
            _ => Tok::Punct(b),
        })
    }
}

impl Lexer<'_> {
    fn skip_blanks(&mut self) {
        while let Some(&c) = self.s.get(self.pos) {
            let next = self.s.get(self.pos + 1).copied();
            match c {
                _ if is_space(c) => self.pos += 1,
                // A line comment ends at either newline character.
                b'-' if next == Some(b'-') => {
                    self.pos = skip_while(self.s, self.pos, |c| c != b'\n' && c != b'\r');
                }
                b'/' if next == Some(b'*') => self.block_comment(),
                _ => return,
            }
        }
    }

    /// `/* ... */` nests in PostgreSQL, unlike in C.
    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(rest) = self.s.get(self.pos..).filter(|r| !r.is_empty()) {
            match rest {
                [b'/', b'*', ..] => {
                    depth += 1;
                    self.pos += 2;
                }
                [b'*', b'/', ..] => {
                    depth = depth.saturating_sub(1);
                    self.pos += 2;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.pos += 1,
            }
        }
        self.unterminated = true;
    }

    /// A word, or the prefixes that start quotes: `E'` (backslash escapes),
    /// `N'` (as a plain quote), `B'` and `X'` (bit strings, which end at
    /// the first quote), `U&'` and `U&"` (Unicode escapes, no backslashes).
    fn word(&mut self, start: usize) -> Tok {
        // Most words are just words: a quote prefix has a quote or `&` second.
        if !matches!(self.s.get(start + 1), Some(b'\'' | b'&')) {
            self.pos = skip_while(self.s, self.pos, is_ident_cont);
            return Tok::Word(start, self.pos);
        }
        match self.s.get(start..).unwrap_or_default() {
            [b'e' | b'E', b'\'', ..] => {
                self.pos = start + 2;
                self.string(true)
            }
            [b'n' | b'N', b'\'', ..] => {
                self.pos = start + 2;
                self.string(!self.standard)
            }
            [b'b' | b'B' | b'x' | b'X', b'\'', ..] => {
                self.pos = start + 2;
                self.bit_string()
            }
            [b'u' | b'U', b'&', b'\'', ..] => {
                self.pos = start + 3;
                self.string(false)
            }
            [b'u' | b'U', b'&', b'"', ..] => {
                self.pos = start + 3;
                self.escaped_ident = true;
                self.quoted()
            }
            _ => {
                self.pos = skip_while(self.s, self.pos, is_ident_cont);
                Tok::Word(start, self.pos)
            }
        }
    }

    /// The rest of a string literal after its opening quote.
    fn string(&mut self, backslash: bool) -> Tok {
        let s = self.s;
        let mut i = self.pos;
        while let Some(&c) = s.get(i) {
            i += 1;
            match c {
                b'\\' if backslash => i += 1,
                b'\'' if s.get(i) == Some(&b'\'') => i += 1,
                b'\'' => match continuation(s, i) {
                    // `'a'\n'b'` is one literal, read the same way throughout.
                    Some(next) => i = next,
                    None => {
                        self.pos = i;
                        return Tok::Str;
                    }
                },
                _ => {}
            }
        }
        self.pos = s.len();
        self.unterminated = true;
        Tok::Str
    }

    /// The rest of a `B'...'` or `X'...'` literal: no escapes, and a
    /// doubled quote is two literals, as PostgreSQL reads them.
    fn bit_string(&mut self) -> Tok {
        loop {
            let rest = self.s.get(self.pos..).unwrap_or_default();
            match rest.iter().position(|&c| c == b'\'') {
                Some(at) => self.pos += at + 1,
                None => {
                    self.pos = self.s.len();
                    self.unterminated = true;
                    return Tok::Str;
                }
            }
            match continuation(self.s, self.pos) {
                Some(next) => self.pos = next,
                None => return Tok::Str,
            }
        }
    }

    /// The rest of a quoted identifier after its opening quote.
    fn quoted(&mut self) -> Tok {
        let s = self.s;
        let start = self.pos;
        let mut i = start;
        while let Some(&c) = s.get(i) {
            if c == b'"' {
                if s.get(i + 1) != Some(&b'"') {
                    self.pos = i + 1;
                    return Tok::Quoted(start, i);
                }
                i += 1;
            }
            i += 1;
        }
        self.pos = s.len();
        self.unterminated = true;
        Tok::Quoted(start, s.len())
    }

    /// `$tag$...$tag$`, or a `$1` placeholder (a tag cannot start with a digit).
    fn dollar(&mut self, start: usize) -> Tok {
        let s = self.s;
        let tag_end = skip_while(s, start + 1, is_tag_char);
        let first = s.get(start + 1).copied().unwrap_or(b'0');
        if s.get(tag_end) != Some(&b'$') || first.is_ascii_digit() {
            self.pos = skip_while(s, start + 1, |c| c.is_ascii_digit());
            return Tok::Other;
        }
        let body = tag_end + 1;
        let delim = s.get(start..body).unwrap_or_default();
        let end = find_delim(s, body, delim).unwrap_or_else(|| {
            self.unterminated = true;
            s.len()
        });
        self.pos = (end + delim.len()).min(s.len());
        Tok::Body(body, end)
    }
}

/// After a literal's closing quote at `i - 1`: where its continuation's
/// contents start, when whitespace with a newline (line comments allowed)
/// and another quote follow, as PostgreSQL's quotecontinue reads them.
fn continuation(s: &[u8], mut i: usize) -> Option<usize> {
    let mut newline = false;
    loop {
        match s.get(i..)? {
            [b' ' | b'\t' | 0x0b | 0x0c, ..] => i += 1,
            [b'\n' | b'\r', ..] => {
                newline = true;
                i += 1;
            }
            [b'-', b'-', ..] => i = skip_while(s, i, |c| c != b'\n' && c != b'\r'),
            [b'\'', ..] if newline => return Some(i + 1),
            _ => return None,
        }
    }
}

/// First `delim` at or after `from`. Linear: `delim`'s tag holds no `$`, so the
/// bytes matched before a mismatch are never the start of another candidate.
pub(super) fn find_delim(s: &[u8], from: usize, delim: &[u8]) -> Option<usize> {
    let mut i = from;
    while let Some(off) = s.get(i..)?.iter().position(|&c| c == b'$') {
        let p = i + off;
        let rest = s.get(p..).unwrap_or_default();
        if rest.len() >= delim.len() && rest.iter().zip(delim).all(|(a, b)| a == b) {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table says what scan.l's character classes say, for every byte.
    #[test]
    fn byte_classes_are_postgresqls() {
        for b in 0..=255u8 {
            let start = b.is_ascii_alphabetic() || b == b'_' || b >= 0x80;
            assert_eq!(is_ident_start(b), start, "{b}");
            assert_eq!(
                is_ident_cont(b),
                start || b.is_ascii_digit() || b == b'$',
                "{b}"
            );
            assert_eq!(is_tag_char(b), start || b.is_ascii_digit(), "{b}");
            let space = matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
            assert_eq!(is_space(b), space, "{b}");
        }
    }
}
