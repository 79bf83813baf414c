//! Byte classes, word helpers and the comment, dollar-quote and literal-continuation scans
//! shared by the masker, the lexer and the rules. Everything here works on
//! bytes: PostgreSQL's lexer does too (every byte >= 0x80 is an identifier byte).

/// Bytes that continue a PostgreSQL identifier. Bytes >= 0x80 are identifier characters in
/// PostgreSQL, so every byte of a non-ASCII character counts. One load from a table: words are
/// what the guard's passes spend most of their bytes on.
#[inline]
pub(super) fn is_ident(b: u8) -> bool {
    IDENT[b as usize]
}

/// [`is_ident`] for every byte.
static IDENT: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
        b += 1;
    }
    table
};

/// Bytes that may start a word (keyword or identifier), and a dollar-quote tag (`$1` is a
/// parameter, not a tag).
#[inline]
pub(super) fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

/// Later bytes of a dollar-quote tag (no `$`: it ends the tag).
#[inline]
pub(super) fn is_tag_cont(b: u8) -> bool {
    is_word_start(b) || b.is_ascii_digit()
}

/// PostgreSQL's whitespace (`\v` since 16; older servers reject it, which is also safe).
#[inline]
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Whether `b[at] == '$'` may open a dollar quote: not inside an identifier (`a$b`), and followed
/// by `$` or a tag start. A tag without its closing `$` is not a quote, so this over-approximates.
#[inline]
pub(super) fn may_open_dollar(b: &[u8], at: usize) -> bool {
    (at == 0 || !is_ident(b[at - 1]))
        && matches!(b.get(at + 1), Some(&c) if c == b'$' || is_word_start(c))
}

/// Calls `visit(i)`, in order and while it returns true, for every `i` with
/// `candidate(b[i], b[i + 1])` (0 stands for the byte after the end).
///
/// Most bytes of a statement are not candidates, so each 32-byte chunk is tested as a whole
/// with a branch-free fold over fixed-size arrays into a bit mask of its candidates; only those
/// are visited.
#[inline(always)]
pub(super) fn for_each_candidate(
    b: &[u8],
    candidate: impl Fn(u8, u8) -> bool,
    mut visit: impl FnMut(usize) -> bool,
) {
    const CHUNK: usize = 32;
    let mut base = 0;
    while base + CHUNK < b.len() {
        let (Ok(cur), Ok(next)) = (
            <&[u8; CHUNK]>::try_from(&b[base..base + CHUNK]),
            <&[u8; CHUNK]>::try_from(&b[base + 1..base + CHUNK + 1]),
        ) else {
            break; // unreachable: both slices are CHUNK bytes long
        };
        // A flag per byte, then a bit mask of the flags: written this way the compiler turns
        // the flags into vector compares (a fold straight into the mask stays scalar), and
        // only the candidate bytes are visited, not every byte of the chunk.
        let mut flags = [false; CHUNK];
        for k in 0..CHUNK {
            flags[k] = candidate(cur[k], next[k]);
        }
        let mut bits = 0u32;
        if flags.iter().fold(false, |any, &f| any | f) {
            for (k, &f) in flags.iter().enumerate() {
                bits |= u32::from(f) << k;
            }
        }
        while bits != 0 {
            let k = bits.trailing_zeros() as usize;
            if !visit(base + k) {
                return;
            }
            bits &= bits - 1;
        }
        base += CHUNK;
    }
    for i in base..b.len() {
        if candidate(b[i], b.get(i + 1).copied().unwrap_or(0)) && !visit(i) {
            return;
        }
    }
}

/// Whether `m[at..]` starts with `word` (lower-case ASCII), in any case, as a whole identifier.
pub(super) fn is_word_at(m: &[u8], at: usize, word: &[u8]) -> bool {
    let end = at + word.len();
    (at == 0 || !is_ident(m[at - 1]))
        && m.get(at..end).is_some_and(|w| w.eq_ignore_ascii_case(word))
        && m.get(end).is_none_or(|&c| !is_ident(c))
}

/// End of the identifier run starting at `i`.
pub(super) fn word_end(m: &[u8], i: usize) -> usize {
    m[i..]
        .iter()
        .position(|&c| !is_ident(c))
        .map_or(m.len(), |p| i + p)
}

/// The first index at or after `i` that is not whitespace (or the length).
pub(super) fn skip_space(m: &[u8], i: usize) -> usize {
    m[i..]
        .iter()
        .position(|&c| !is_space(c))
        .map_or(m.len(), |p| i + p)
}

/// The index just after the last non-space byte before `i` (0 if there is none).
pub(super) fn skip_space_back(m: &[u8], mut i: usize) -> usize {
    while i > 0 && is_space(m[i - 1]) {
        i -= 1;
    }
    i
}

/// The identifier run after whitespace from `i`, if the next non-space byte starts one.
pub(super) fn next_word(m: &[u8], i: usize) -> Option<(usize, usize)> {
    let s = skip_space(m, i);
    (s < m.len() && is_ident(m[s])).then(|| (s, word_end(m, s)))
}

/// The identifier run that ends where the whitespace before `i` begins, if there is one.
pub(super) fn prev_word(m: &[u8], i: usize) -> Option<(usize, usize)> {
    let e = skip_space_back(m, i);
    let mut s = e;
    while s > 0 && is_ident(m[s - 1]) {
        s -= 1;
    }
    (s < e).then_some((s, e))
}

/// End of the line comment starting at `i`: the next `\n` or `\r` (not included), or the end.
pub(super) fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n' || c == b'\r')
        .map_or(b.len(), |p| i + p)
}

/// End of the (nesting) block comment starting at `b[i..i + 2] == "/*"`, or the end of the text.
pub(super) fn block_comment_end(b: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < b.len() {
        match (b[j], b.get(j + 1)) {
            (b'/', Some(b'*')) => {
                depth += 1;
                j += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return j;
                }
            }
            _ => j += 1,
        }
    }
    b.len()
}

/// If `b[i] == '$'` opens a dollar quote (`$$` or `$tag$`), the index after its opening
/// delimiter. (A `$` inside an identifier never gets here: the word took it.)
pub(super) fn dollar_tag_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if b.get(j).is_some_and(|&c| is_word_start(c)) {
        j += 1;
        while b.get(j).is_some_and(|&c| is_tag_cont(c)) {
            j += 1;
        }
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

/// If the literal that ended at `end` continues (whitespace and `--` comments containing a
/// newline, then a quote), the index of that quote.
pub(super) fn continuation(b: &[u8], end: usize) -> Option<usize> {
    let mut newline = false;
    let mut j = end;
    while j < b.len() {
        match b[j] {
            b'\n' | b'\r' => {
                newline = true;
                j += 1;
            }
            c if is_space(c) => j += 1,
            b'-' if b.get(j + 1) == Some(&b'-') => j = line_end(b, j),
            b'\'' if newline => return Some(j),
            _ => return None,
        }
    }
    None
}
