"""Learning a WordPiece vocabulary (`vocab.txt`) from a corpus's word counts.

google-research/bert ships no learner ("use an off-the-shelf library"); this
one makes vocabularies that `FullTokenizer` and `InGraphTokenizer` use
exactly, because the words it learns from are the original `BasicTokenizer`'s
(`count_words`): punctuation split off, CJK characters one a word, accents
stripped and lower-cased with `do_lower_case`.

The pieces are learned bottom-up, as Hugging Face `tokenizers`'
`WordPieceTrainer` learns them: every word starts as its characters (the
first as itself, the others as `##` continuations), and the adjacent pair
occurring most often in the corpus (word counts summed, ties broken by the
pair's text) is merged into one new piece, again and again, until the
vocabulary is full or no pair occurs `min_frequency` times. Only the words
holding the merged pair are revisited, and pair counts are kept up to date
incrementally (a max-heap whose stale entries are skipped when they surface),
so a merge costs what the words it changes cost, not a pass over the corpus.

The file's layout is the released BERT vocabularies':

    [PAD] [unused0] .. [unused98] [UNK] [CLS] [SEP] [MASK] [unused99] ..
    every character of the corpus, by code point
    the learned pieces, in the order they were learned
    the `##` form of every character, by code point

so with the default 99 unused tokens `[UNK] [CLS] [SEP] [MASK]` get the
released models' ids 100-103. Every character seen gets a token as a word
start, and each one a word can continue with (all but the punctuation and
CJK characters that `BasicTokenizer` always makes a word of their own) a
`##` token too, so greedy longest-match WordPiece covers every word made of
seen characters: `[UNK]` stands only for a word with a character the corpus
never showed (or one longer than `max_input_chars_per_word`).

Example:
>>> counts = count_words(["The lower the better.", "Lowest, lowered!"])
>>> vocab = learn_vocab(counts, vocab_size=150, num_unused=0, min_frequency=2).tokens
>>> vocab[:5], len(vocab) <= 150
(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
>>> vocab[vocab.index("w") + 1:vocab.index("##b")]  # the pieces learned
['##er', '##ow', 'low', '##he', 'lower', 'the']
"""

import collections
import dataclasses
import gc
import heapq

from keras_bert_impl.tokenization.full_tokenizer import BasicTokenizer, is_cjk_char, is_punctuation

CONTINUATION = "##"
# The released vocabularies put [UNK] [CLS] [SEP] [MASK] after [unused98].
UNUSED_BEFORE_SPECIALS = 99


def reserved_tokens(num_unused=UNUSED_BEFORE_SPECIALS):
    """The special and `[unusedN]` tokens that open the vocabulary, in the released order.

    Args:
        num_unused: How many `[unusedN]` tokens to reserve (the released
            English models have 994; the first 99 come before `[UNK]`).

    Returns:
        List of tokens, `[PAD]` first.

    Example:
    >>> reserved_tokens(2)
    ['[PAD]', '[unused0]', '[unused1]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    >>> reserved_tokens(101)[99:]
    ['[unused98]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused99]', '[unused100]']
    """
    if num_unused < 0:
        raise ValueError(f"num_unused must not be negative, got {num_unused}")
    unused = [f"[unused{index}]" for index in range(num_unused)]
    return (["[PAD]"] + unused[:UNUSED_BEFORE_SPECIALS] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + unused[UNUSED_BEFORE_SPECIALS:])


def count_words(texts, do_lower_case=True, counts=None):
    """How often each `BasicTokenizer` word occurs in `texts`.

    Args:
        texts: Iterable of `str`; a text may hold many lines (no word crosses
            whitespace, so splitting a corpus into texts anywhere between
            lines gives the same counts).
        do_lower_case: As `BasicTokenizer`.
        counts: A `collections.Counter` to add to (default: a new one).

    Returns:
        The `collections.Counter` word -> occurrences.

    Example:
    >>> count_words(["Héllo, hello!", "中文"])
    Counter({'hello': 2, ',': 1, '!': 1, '中': 1, '文': 1})
    """
    tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
    counts = collections.Counter() if counts is None else counts
    for text in texts:
        counts.update(tokenizer.tokenize(text))
    return counts


def takes_continuation(char):
    """Whether `char` can continue a word, so needs a `##` token.

    `BasicTokenizer` makes every punctuation and CJK character a word of its own.

    Example:
    >>> takes_continuation("a"), takes_continuation("!"), takes_continuation("中")
    (True, False, False)
    """
    return not (is_punctuation(char) or is_cjk_char(ord(char)))


def alphabet(words):
    """The single-character tokens that cover `words`: word starts and `##` continuations.

    Args:
        words: Iterable of words.

    Returns:
        `(starts, continuations)`, each sorted by code point.

    Example:
    >>> alphabet(["ab", "!", "b"])
    (['!', 'a', 'b'], ['##a', '##b'])
    """
    chars = set()
    for word in words:
        chars.update(word)
    starts = sorted(chars)
    return starts, [CONTINUATION + char for char in starts if takes_continuation(char)]


def learn_pieces(word_counts, num_pieces, min_frequency=2):
    """Multi-character pieces learned by merging the most frequent adjacent pair.

    Args:
        word_counts: Mapping word -> occurrences (words hold no whitespace).
        num_pieces: How many new pieces to learn at most.
        min_frequency: A pair occurring fewer times is never merged; learning
            stops early when no pair is left that often.

    Returns:
        List of new tokens in the order learned (continuations with `##`).

    Example:
    >>> learn_pieces({"hug": 10, "pug": 5, "hugs": 5}, 3)
    ['##ug', 'hug', 'hugs']
    """
    # Millions of small lists and tuples, none in a cycle: the cyclic
    # collector's passes over them would cost more than the merging itself.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _learn_pieces(word_counts, num_pieces, min_frequency)
    finally:
        if collecting:
            gc.enable()


def _learn_pieces(word_counts, num_pieces, min_frequency):
    symbol_ids, symbols = {}, []

    def symbol(token):
        found = symbol_ids.get(token)
        if found is None:
            found = symbol_ids[token] = len(symbols)
            symbols.append(token)
        return found

    starts, continuations = {}, {}
    sequences, counts = [], []
    for word, count in word_counts.items():
        if len(word) < 2 or count <= 0:
            continue  # Nothing to merge in it.
        for char in word:
            if char not in starts:
                starts[char] = symbol(char)
                continuations[char] = symbol(CONTINUATION + char)
        sequences.append([starts[word[0]], *map(continuations.__getitem__, word[1:])])
        counts.append(count)

    # pair -> occurrences in the corpus; pair -> the words that held it (a
    # word may be listed twice, or no longer hold it: it is checked on use).
    pair_counts = collections.defaultdict(int)
    holders = collections.defaultdict(list)
    for index, sequence in enumerate(sequences):
        count = counts[index]
        for pair in zip(sequence, sequence[1:]):
            pair_counts[pair] += count
            holders[pair].append(index)

    def entry(pair, count):
        # Most frequent first; ties by the pair's text, so the result does not
        # depend on the order words were counted in.
        return (-count, symbols[pair[0]], symbols[pair[1]], pair)

    heap = [entry(pair, count) for pair, count in pair_counts.items() if count >= min_frequency]
    heapq.heapify(heap)
    known = set(symbols)
    learned = []
    while heap and len(learned) < num_pieces:
        negative_count, _, _, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -negative_count:
            # Stale: the pair's count fell since (a fresh entry is pushed for
            # the lower count) or rose (a fresh entry was pushed when it rose).
            if min_frequency <= count < -negative_count:
                heapq.heappush(heap, entry(pair, count))
            continue
        left, right = pair
        token = symbols[left] + symbols[right][len(CONTINUATION):]
        new = symbol(token)
        if token not in known:
            known.add(token)
            learned.append(token)
        grown = set()

        def add(new_pair, index, count):
            pair_counts[new_pair] += count
            holders[new_pair].append(index)
            grown.add(new_pair)

        for index in holders.pop(pair):
            sequence = sequences[index]
            count = counts[index]
            # Each occurrence (left to right, not overlapping) changes only the
            # pairs it shares with its neighbours in the word as merged so far.
            last = len(sequence) - 1
            merged, copied, position = None, 0, -1
            while True:
                try:
                    position = sequence.index(left, position + 1)
                except ValueError:
                    break
                if position >= last:
                    break
                if sequence[position + 1] != right:
                    continue
                if merged is None:
                    merged = sequence[:position]
                else:
                    merged.extend(sequence[copied:position])
                if merged:
                    pair_counts[merged[-1], left] -= count
                    add((merged[-1], new), index, count)
                if position + 2 <= last:
                    pair_counts[right, sequence[position + 2]] -= count
                    add((new, sequence[position + 2]), index, count)
                merged.append(new)
                copied = position + 2
                position += 1  # The next occurrence starts after this one.
            if merged is not None:  # None: listed twice, already merged.
                merged.extend(sequence[copied:])
                sequences[index] = merged
        del pair_counts[pair]  # Every occurrence is merged (the neighbours' updates may have counted it down).
        for new_pair in grown:
            if pair_counts[new_pair] >= min_frequency:
                heapq.heappush(heap, entry(new_pair, pair_counts[new_pair]))
    return learned


def no_short_words_error(max_input_chars_per_word, shortest):
    """The `ValueError` for words all longer than `max_input_chars_per_word` (the shortest has `shortest` characters).

    Example:
    >>> no_short_words_error(5, 7)
    ValueError('max_input_chars_per_word 5 leaves none of the words to learn from (the shortest has 7 characters)')
    """
    return ValueError(
        f"max_input_chars_per_word {max_input_chars_per_word} leaves none of the words to learn from "
        f"(the shortest has {shortest} characters)"
    )


@dataclasses.dataclass(frozen=True)
class LearnedVocab:
    """A learned vocabulary, by part (module docstring: the layout).

    Args:
        reserved: The special and `[unusedN]` tokens (`reserved_tokens`).
        starts: Every character of the corpus, by code point.
        pieces: The learned multi-character pieces, in the order learned.
        continuations: The `##` form of each character that can continue a word.
    """

    reserved: list
    starts: list
    pieces: list
    continuations: list

    @property
    def tokens(self):
        """All tokens in id order, as `vocab.txt` lists them."""
        return self.reserved + self.starts + self.pieces + self.continuations


def learn_vocab(word_counts, vocab_size, *, num_unused=UNUSED_BEFORE_SPECIALS, min_frequency=2,
                max_input_chars_per_word=200):
    """A WordPiece vocabulary of at most `vocab_size` tokens for the words of `word_counts`.

    Args:
        word_counts: Mapping word -> occurrences, e.g. from `count_words`.
        vocab_size: Tokens in the vocabulary; fewer when no pair is left
            that occurs `min_frequency` times.
        num_unused: `[unusedN]` tokens reserved (see `reserved_tokens`).
        min_frequency: Fewest occurrences of a pair for it to become a piece.
        max_input_chars_per_word: Longer words are left out: the tokenizer
            makes them `[UNK]` whatever the vocabulary.

    Returns:
        The `LearnedVocab`; its `tokens` are the vocabulary in id order.

    Raises:
        ValueError: `word_counts` holds no word (of at most
            `max_input_chars_per_word` characters), or `vocab_size` is smaller
            than the reserved tokens and the corpus's single characters (the
            message starts with the argument's name).

    Example:
    >>> learned = learn_vocab({"hugs": 3, "hug": 2, "!": 1}, vocab_size=17, num_unused=0)
    >>> learned.tokens[5:]
    ['!', 'g', 'h', 's', 'u', '##ug', 'hug', 'hugs', '##g', '##h', '##s', '##u']
    """
    if not word_counts:
        raise ValueError("word_counts holds no words to learn a vocabulary from")
    words = {word: count for word, count in word_counts.items()
             if count > 0 and 0 < len(word) <= max_input_chars_per_word}
    if not words:
        raise no_short_words_error(max_input_chars_per_word, min(map(len, word_counts)))
    reserved = reserved_tokens(num_unused)
    starts, continuations = alphabet(words)
    needed = len(reserved) + len(starts) + len(continuations)
    if vocab_size < needed:
        raise ValueError(
            f"vocab_size {vocab_size} cannot hold the {len(reserved)} special and unused tokens and the corpus's "
            f"{len(starts)} characters ({len(continuations)} of them also as ## continuations): it needs at least "
            f"{needed}"
        )
    pieces = learn_pieces(words, vocab_size - needed, min_frequency=min_frequency)
    return LearnedVocab(reserved, starts, pieces, continuations)


__all__ = [
    "LearnedVocab",
    "alphabet",
    "count_words",
    "learn_pieces",
    "learn_vocab",
    "no_short_words_error",
    "reserved_tokens",
    "takes_continuation",
]
