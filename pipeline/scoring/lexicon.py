"""Words that negate, hedge, condition or withdraw an answer, in many languages and scripts.

Inside a committed answer no such list is needed: any word the gold does not hold makes the answer
wrong, whatever its script (pipeline/scoring/commit.py, `foreign_word`). Around the answer the
prose is free, so the sentence that offers the answer and the text after it are read against
this lexicon instead. Each entry is (language, category, words):

* `negation` — "not", "no", "never", "none" and their kin;
* `alternative` — "or", "either", "otherwise", "alternatively";
* `hedge` — "maybe", "perhaps", "probably", "approximately", "roughly";
* `condition` — "if", "unless", "assuming", "provided";
* `denial` — "wrong", "incorrect", "false", "mistake";
* `correction` — "wait", "actually", "sorry", "let me redo".

English is read by commit.py's finer rules (contractions, "the answer is 41" restatements); the
other languages here are read as plain words. Scripts written without spaces (Chinese, Japanese,
Thai) are matched as substrings; the rest on Unicode word boundaries.

Test: `.venv/bin/pytest tests/scoring/test_committed_answer.py -q`
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

Category = Literal["negation", "alternative", "hedge", "condition", "denial", "correction"]
CATEGORIES: tuple[Category, ...] = (
    "negation",
    "alternative",
    "hedge",
    "condition",
    "denial",
    "correction",
)

# language -> category -> words. Lower case; matched case-insensitively.
LEXICON: dict[str, dict[Category, tuple[str, ...]]] = {
    "en": {
        "negation": ("not", "no", "never", "none", "cannot", "isn't", "isnt", "nor", "neither"),
        "alternative": ("or", "either", "otherwise", "alternatively", "instead"),
        "hedge": ("maybe", "perhaps", "probably", "possibly", "approximately", "roughly",
                  "guess", "unsure", "might"),
        "condition": ("if", "unless", "assuming", "provided", "supposing"),
        "denial": ("wrong", "incorrect", "false", "mistake", "invalid"),
        "correction": ("wait", "actually", "oops", "sorry"),
    },
    "de": {
        "negation": ("nicht", "kein", "keine", "keinen", "nie", "niemals", "nein"),
        "alternative": ("oder", "entweder", "sonst", "andernfalls", "alternativ"),
        "hedge": ("vielleicht", "wahrscheinlich", "ungefähr", "etwa", "circa", "vermutlich"),
        "condition": ("wenn", "falls", "sofern", "außer"),
        "denial": ("falsch", "fehler", "unrichtig", "inkorrekt"),
        "correction": ("warte", "eigentlich", "korrektur"),
    },
    "fr": {
        "negation": ("ne", "pas", "non", "jamais", "aucun", "aucune", "n'est"),
        "alternative": ("ou", "soit", "sinon", "autrement"),
        "hedge": ("peut-être", "probablement", "environ", "approximativement", "sans doute"),
        "condition": ("si", "sauf", "à condition"),
        "denial": ("faux", "fausse", "incorrect", "incorrecte", "erreur"),
        "correction": ("attendez", "attends", "en fait", "pardon"),
    },
    "es": {
        "negation": ("no", "nunca", "ningún", "ninguno", "ninguna", "jamás"),
        "alternative": ("o", "u", "sino", "alternativamente"),
        "hedge": ("quizás", "quizá", "tal vez", "probablemente", "aproximadamente"),
        "condition": ("si", "salvo", "a menos"),
        "denial": ("falso", "falsa", "incorrecto", "incorrecta", "error"),
        "correction": ("espera", "en realidad", "perdón"),
    },
    "it": {
        "negation": ("non", "mai", "nessuno", "nessuna", "niente"),
        "alternative": ("o", "oppure", "altrimenti"),
        "hedge": ("forse", "probabilmente", "circa", "approssimativamente"),
        "condition": ("se", "purché", "a meno"),
        "denial": ("sbagliato", "sbagliata", "errato", "errata", "falso"),
        "correction": ("aspetta", "in realtà", "scusa"),
    },
    "pt": {
        "negation": ("não", "nunca", "nenhum", "nenhuma", "jamais"),
        "alternative": ("ou", "senão", "alternativamente"),
        "hedge": ("talvez", "provavelmente", "aproximadamente", "cerca"),
        "condition": ("se", "caso", "a menos"),
        "denial": ("errado", "errada", "incorreto", "incorreta", "falso"),
        "correction": ("espere", "na verdade", "desculpe"),
    },
    "nl": {
        "negation": ("niet", "geen", "nooit", "nee"),
        "alternative": ("ofwel", "anders", "oftewel"),
        "hedge": ("misschien", "waarschijnlijk", "ongeveer"),
        "condition": ("tenzij", "indien", "mits"),
        "denial": ("fout", "onjuist", "verkeerd"),
        "correction": ("wacht", "eigenlijk"),
    },
    "sv": {
        "negation": ("inte", "ej", "aldrig", "ingen", "inget", "nej"),
        "alternative": ("eller", "annars"),
        "hedge": ("kanske", "troligen", "ungefär", "cirka"),
        "condition": ("om", "såvida"),
        "denial": ("fel", "felaktig", "falsk"),
        "correction": ("vänta", "egentligen"),
    },
    "pl": {
        "negation": ("nie", "nigdy", "żaden", "żadna", "brak"),
        "alternative": ("lub", "albo", "czy", "inaczej"),
        "hedge": ("może", "prawdopodobnie", "około", "mniej więcej"),
        "condition": ("jeśli", "jeżeli", "chyba że"),
        "denial": ("błąd", "błędny", "błędna", "źle", "fałsz"),
        "correction": ("czekaj", "właściwie"),
    },
    "ru": {
        "negation": ("не", "нет", "никогда", "ни"),
        "alternative": ("или", "либо", "иначе"),
        "hedge": ("может", "возможно", "вероятно", "примерно", "около", "приблизительно"),
        "condition": ("если", "кроме"),
        "denial": ("неверно", "неправильно", "ошибка", "ложь", "неверный"),
        "correction": ("подождите", "подожди", "стоп", "вообще-то"),
    },
    "uk": {
        "negation": ("ні", "не", "ніколи"),
        "alternative": ("або", "чи", "інакше"),
        "hedge": ("можливо", "мабуть", "приблизно"),
        "condition": ("якщо", "коли"),
        "denial": ("неправильно", "помилка", "хибно"),
        "correction": ("зачекайте", "насправді"),
    },
    "tr": {
        "negation": ("değil", "hayır", "yok", "asla"),
        "alternative": ("veya", "ya da", "yoksa", "aksi"),
        "hedge": ("belki", "muhtemelen", "yaklaşık", "galiba"),
        "condition": ("eğer", "şayet"),
        "denial": ("yanlış", "hatalı", "hata"),
        "correction": ("bekle", "aslında"),
    },
    "el": {
        "negation": ("δεν", "όχι", "μην", "ποτέ"),
        "alternative": ("ή", "αλλιώς"),
        "hedge": ("ίσως", "πιθανώς", "περίπου"),
        "condition": ("αν", "εάν", "εκτός"),
        "denial": ("λάθος", "λανθασμένο", "ψευδές"),
        "correction": ("περίμενε", "στην πραγματικότητα"),
    },
    "ar": {
        "negation": ("ليس", "لا", "لم", "لن", "ليست"),
        "alternative": ("أو", "وإلا"),
        "hedge": ("ربما", "تقريبا", "تقريباً", "حوالي"),
        "condition": ("إذا", "إن", "لو"),
        "denial": ("خطأ", "خاطئ", "خاطئة"),
        "correction": ("انتظر", "في الواقع"),
    },
    "he": {
        "negation": ("לא", "אין", "אף"),
        "alternative": ("או", "אחרת"),
        "hedge": ("אולי", "כנראה", "בערך"),
        "condition": ("אם", "אלא"),
        "denial": ("שגוי", "טעות", "לא נכון"),
        "correction": ("רגע", "בעצם"),
    },
    "hi": {
        "negation": ("नहीं", "न", "मत", "कभी नहीं"),
        "alternative": ("या", "अथवा", "वरना"),
        "hedge": ("शायद", "लगभग", "संभवतः"),
        "condition": ("अगर", "यदि"),
        "denial": ("गलत", "ग़लत", "त्रुटि"),
        "correction": ("रुको", "असल में"),
    },
    "id": {
        "negation": ("tidak", "bukan", "tak", "belum"),
        "alternative": ("atau", "kalau tidak"),
        "hedge": ("mungkin", "kira-kira", "sekitar", "barangkali"),
        "condition": ("jika", "kalau", "kecuali"),
        "denial": ("salah", "keliru"),
        "correction": ("tunggu", "sebenarnya"),
    },
    "vi": {
        "negation": ("không", "chẳng", "chưa"),
        "alternative": ("hoặc",),
        "hedge": ("có lẽ", "khoảng", "chắc là"),
        "condition": ("nếu", "trừ khi"),
        "denial": ("sai", "nhầm"),
        "correction": ("khoan", "thực ra"),
    },
    "zh": {
        "negation": ("不", "没", "沒", "非", "无", "無", "未"),
        "alternative": ("或", "或者", "还是", "還是", "否则", "否則"),
        "hedge": ("可能", "大概", "也许", "也許", "大约", "大約", "约", "約"),
        "condition": ("如果", "假如", "除非", "若"),
        "denial": ("错", "錯", "不对", "不對", "错误", "錯誤"),
        "correction": ("等等", "其实", "其實"),
    },
    "ja": {
        "negation": ("ない", "ではない", "じゃない", "ません", "いいえ"),
        "alternative": ("または", "あるいは", "もしくは", "それとも"),
        "hedge": ("たぶん", "多分", "おそらく", "かもしれ", "約", "だいたい"),
        "condition": ("もし", "ならば", "場合"),
        "denial": ("間違", "誤り", "不正解"),
        "correction": ("待って", "実は"),
    },
    "ko": {
        "negation": ("아니", "않", "없", "못"),
        "alternative": ("또는", "혹은", "아니면"),
        "hedge": ("아마", "약", "대략", "어쩌면"),
        "condition": ("만약", "만일"),
        "denial": ("틀렸", "틀린", "오류", "잘못"),
        "correction": ("잠깐", "사실은"),
    },
    "th": {
        "negation": ("ไม่", "ไม่ใช่"),
        "alternative": ("หรือ",),
        "hedge": ("อาจจะ", "ประมาณ"),
        "condition": ("ถ้า", "หาก"),
        "denial": ("ผิด",),
        "correction": ("เดี๋ยว",),
    },
}  # fmt: skip

# Scripts without spaces between words: their entries match anywhere in the text.
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f]")


def words(languages: tuple[str, ...], categories: tuple[Category, ...]) -> frozenset[str]:
    """Every word of `categories` in `languages`."""
    return frozenset(
        w for lang in languages for cat in categories for w in LEXICON[lang].get(cat, ())
    )


@lru_cache(maxsize=64)
def pattern(languages: tuple[str, ...], categories: tuple[Category, ...]) -> re.Pattern[str]:
    """One regex matching any word of `categories` in `languages` (spaced scripts on word
    boundaries, unspaced ones as substrings); linear in the text scanned."""
    entries = sorted(words(languages, categories), key=len, reverse=True)
    # one-letter words ("o", "u", "ή") are read as variables in prose around an answer
    spaced = [re.escape(w) for w in entries if _UNSPACED.search(w) is None and len(w) > 1]
    unspaced = [re.escape(w) for w in entries if _UNSPACED.search(w) is not None]
    return _compile(spaced, unspaced)


# Foreign words that are also English words ("no", "non", "incorrect", "error"): English prose
# after an answer uses them without withdrawing it ("there is no other answer"), so the scan of
# the text after an answer for other languages' words leaves them to English's finer rules.
_ENGLISH_COLLISIONS = frozenset(
    [
        "no",
        "non",
        "ne",
        "se",
        "si",
        "o",
        "u",
        "pas",
        "mai",
        "om",
        "fel",
        "tak",
        "sai",
        "incorrect",
        "error",
        "circa",
        "caso",
        "fault",
        "hay",
        "moment",
        "sale",
        "ni",
        "ή",
    ]
)


@lru_cache(maxsize=64)
def english_free_pattern(
    languages: tuple[str, ...], categories: tuple[Category, ...]
) -> re.Pattern[str]:
    """`pattern` without the words English shares (see _ENGLISH_COLLISIONS and English's own)."""
    shared = _ENGLISH_COLLISIONS | words(("en",), CATEGORIES)
    kept = sorted(words(languages, categories) - shared, key=len, reverse=True)
    spaced = [re.escape(w) for w in kept if _UNSPACED.search(w) is None and len(w) > 1]
    unspaced = [re.escape(w) for w in kept if _UNSPACED.search(w) is not None]
    return _compile(spaced, unspaced)


def _compile(spaced: list[str], unspaced: list[str]) -> re.Pattern[str]:
    parts = []
    if spaced:
        parts.append(r"(?<![\w'’-])(?:" + "|".join(spaced) + r")(?![\w'’-])")
    if unspaced:
        parts.append("(?:" + "|".join(unspaced) + ")")
    return re.compile("|".join(parts), re.IGNORECASE)


LANGUAGES: tuple[str, ...] = tuple(LEXICON)
FOREIGN: tuple[str, ...] = tuple(lang for lang in LEXICON if lang != "en")
