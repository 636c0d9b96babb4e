"""Verdicts read from what an agent says: a refusal, an admission that the task could not be done, a
claim that it was done.

Read sentence by sentence, clause by clause, the way a person reads them: a statement of inability
counts only when its subject is the agent or the task ("I can't plan this", "the order could not be
placed"), not another person ("the user cannot log in") or the reader ("you cannot go wrong"); not
when it is negated in its clause ("it is not impossible"), an idiom ("I can't wait"), a condition
("if it fails, ...") or a constraint the agent works around ("I cannot read the image myself, so I
use OCR"). A failure of one call followed by a recovery ("failed, but the retry worked") is no
admission; the clause that comes last decides. Measured both ways on the labelled corpora in
tests/verdicts/ (rates in docs/verdicts.md).
"""

from __future__ import annotations

import functools
import re

from toolsweep.evaluator import verdict_model

_I = re.IGNORECASE

_SENTENCE = re.compile(r"(?<=[.!?;\n])\s+|\n+")
# Clause boundaries: a comma or colon, and the conjunctions that turn an outcome around.
_CLAUSE = re.compile(r"\s*[,:]\s+|\s+(?=\b(?:but|though|however|although|whereas)\b)|\s+-{1,2}\s+|\s+—\s+", _I)

# Statements of inability or refusal, the agent's or the task's.
_INABILITY = re.compile(
    r"\b(?:can['’]?t|cannot|can not|could not|couldn['’]?t)|won['’]?t be able|will not be able|wouldn['’]?t be able"
    r"|(?:am|was|were|is|are|has been|have been|['’]m|['’]s|['’]re)?\s*(?:not|n['’]t|never) (?:been )?able to"
    r"|(?:am|was|were|is|are|['’]m|['’]s|['’]re)?\s*unable to"
    r"|not in a position to|did(?: not|n['’]t) (?:manage|succeed|work|finish|complete|go through)"
    r"|failed to (?:complete|finish|do|book|send|get|retrieve|make|place|create)"
    r"|(?:is|was|were|are|be|['’]s|seems|appears|looks)\s+(?:(?!not\b|never\b)\w+\s+)?(?:impossible|infeasible|unsolvable|not solvable|not possible|not feasible)"
    r"|^(?:impossible|not possible|infeasible|no luck|no results?|not done|nope|no plan)\b"
    r"|\bno plan (?:is|was) possible|no plan from me|plan:\s*none"
    r"|(?:there['’]?s|there is|there was|have|had|i see) no (?:other )?way"
    r"|nothing (?:more |else )?(?:i|we) can do|nothing more to be done|no-go|this is a no\b|unfortunately,? not\b"
    r"|don['’]?t think i can|(?:not|isn['’]t) something (?:i|we) can|beyond (?:my|what|the)|(?:have to|must|need to) say no|(?:don['’]?t|do not) think (?:this|it|that)(?: is|['’]s) (?:possible|doable|feasible)|outside (?:what|the scope|my)|(?:not|isn['’]t) doable"
    r"|(?:i|we)(?:['’]m| am| are| have| must| will|['’]ll| had)? (?:therefore |thus |also |respectfully )?(?:have to |had to |must |going to (?:have to )?|need to )?"
    r"(?:decline|declining|refuse|pass on this|stop here|stop without|stopping|give up|giving up|gave up|abort)\b(?! to make)"
    r"|i(?:['’]m| am) (?:going to |not going to )?stop\b|(?:i|we) (?:have|had|must) to stop|i stopped because"
    r"|(?:i|we) (?:have|had) decided not to|(?:i['’]m|i am|i will|i['’]ll) not (?:going to )?(?:proceed|plan|generate|be doing|do)"
    r"|won['’]?t (?:proceed|plan|do|be \w+ing|generate|help)|will not (?:proceed|plan|do|generate|help)"
    r"|(?:i['’]m|i am|i got) stuck|dead end|i lack\b|(?:don['’]?t|do not) have (?:the means|a tool|any tool|a result|the \w+ you asked|enough information|a way)"
    r"|there is no tool|there['’]s no tool|there isn['’]t (?:a|any) tool|none of (?:the|these|my) (?:\w+ )?tools can|(?:don['’]?t|do not) see how|no tool (?:\w+ )?(?:can|that can)"
    r"|nothing (?:(?:in|available|here|else|that)\s+(?:\w+\s+)?)?can (?!stop)\w+"
    r"|(?:is|are|was|were|isn['’]t|wasn['’]t|remains?|has|have)\s+(?:not |never )?(?:been )?(?:incomplete|unfinished|undone|abandoned|unsuccessful|aborted)"
    r"|\b(?:task|request|job|order) (?:is )?(?:incomplete|aborted|declined|undone)|request declined|was not a success|not a success"
    r"|(?:is|was|were|are|has|have|had|['’]s|it)\s*(?:n['’]t|not|never)\s+(?:yet\s+)?(?:been\s+)?(?:\w+ly\s+)?(?:successful|completed?|done|finished|made|placed|sent|booked|delivered|"
    r"created|uploaded|scheduled|saved|issued|processed|fulfilled|carried out|accomplished|received|generated|possible|go(?:ne)? through|happen(?:ed)?)\b"
    r"|never (?:succeeded|placed|sent|went through|worked|uploaded|delivered)|not (?:quite|yet)\b|still pending|only partly|could only do part"
    r"|\b(?:no|nothing|none)\b(?! (?:one|longer))[^.,;]{0,25}?\b(?:was|were|has been|have been|exists?)\s+(?!left|lost|missing|wrong|needed|impossible|specified|given|required|provided|necessary"
    r"|unavailable|down|broken|offline|unreachable|failed|failing|skipped|blocked|rejected|denied|refused|dropped|a problem|an issue|an error)\w+"
    r"|before i can \w+[^.]*\bi need|(?:is|are|was|were) missing from (?:the|your) (?:request|query|task)"
    r"|(?:was|were|is|are|has|have)(?: never| not|n['’]t) (?:been )?(?:provided|given|specified|supplied|included|attached|uploaded)"
    r"|none of the steps succeeded|(?:nothing|no \w+) (?:is|was|were) (?:attached|included|provided|given|uploaded)|\b(?:task|request|job|order|booking) not (?:completed|done|finished|placed|made)|everything after it failed|\bREJECT(?:ED)?\b"
    r"|(?:not|n['’]t) going to be able|(?:required|needed|necessary)\s+[^.,;]{0,40}?(?:is|are|was|were)\s+(?:missing|unavailable|gone|not (?:provided|available|given|present))",
    _I)
# Requests for the missing input in place of a plan (J8: a clarification request): a question for it,
# or a plea to supply it.
_QUESTION = re.compile(
    r"^(?:could|can|would) you (?:please )?(?:tell|share|provide|confirm|specify|send|clarify|give|let me know|attach|upload|add)"
    r"|^(?:which|what|who|where|how many|how much)\b(?! would you like| is better| else)", _I)
_PLEA = re.compile(r"\b(?:please|kindly) (?:provide|supply|send|attach|tell|clarify|specify|share|confirm|add|give)\b"
                   r"|\blet me know (?:the|which|what|who)\b|\bi need (?:you to|more information|the missing)|\bi need to know\b", _I)
_ANSWERED = re.compile(r"^(?:yes|no|the plan|i['’]ll|i will|here|step|plan)\b", _I)
# Idioms and sub-actions around a plan: "can't wait", "couldn't be happier", "I cannot read the image myself, so I use OCR".
_IDIOM = re.compile(
    r"\b(?:can['’]?t|cannot|could not|couldn['’]?t|unable to|won['’]?t|impossible to|not possible to)\s+(?:\w+\s+)?"
    r"(?:wait|believe|be (?:happier|more|simpler|easier|better)|have (?:asked|gone)|see any|see anything|think of|stress|promise|"
    r"recommend|thank|go wrong|go back|go faster|beat|hurt|say|miss|tell the difference|overstate|emphasi[sz]e|predict|know in advance|fail\b|imagine|be (?:emphasi[sz]ed|overstated)|find a better|make you wait|need|stop this"
    r"|find (?:any|a) (?:remaining|further|outstanding|more) (?:steps?|tasks?|work|items?|things? to do))", _I)
_OTHER_SUBJECT = re.compile(r"\b(?:you|user|users|customer|client|patient|people|no one|nobody|they|he|she|one|answer|attempt)"
                            r"(?:\s+(?:is|are|was|were|still))?\s*$", _I)
_NEGATION = re.compile(r"\b(?:not|no|nothing|never|none|neither|nor|isn['’]t|wasn['’]t|aren['’]t|reason)\b", _I)
_CONDITION = re.compile(r"^(?:if|unless|in case|even if|when|whether|because|since|as|even though)\b", _I)
_WORKAROUND = re.compile(
    r"\binstead\b|which is why|\bso (?:the plan|the tools?|i use|i(?:['’]ll| will) use|we)\b|\b(?:the|this) plan (?!would|can|cannot|can['’]t|is not|isn['’]t|needs|requires)\w+s\b"
    r"|\bbut (?:we|i) (?:can|have)\b(?!['’]?t| not)|\bis enough\b|\bhandles (?:that|it)\b|\bi use the\b", _I)

# Outcomes of the attempt: a call that failed, and a result that was reached.
_FAILED = re.compile(r"\b(?:fail(?:ed|s|ing)|errored(?: out)?|crashed|did(?: not|n['’]t) work|rejected every|keeps? (?:failing|timing out|returning errors)"
                     r"|returned (?:an |server )?errors?|(?:did not|didn['’]t|was not|wasn['’]t)(?=[.!]?$)|(?:is|are) (?:down|broken|failing|unavailable|offline|not working)|outage)\b", _I)
_RECOVERED = re.compile(r"\b(?:retried|successfully|at first|initially|once|temporar\w+|for a moment|first (?:call|attempt|try)|after (?:one|a|two|several) failed)\b", _I)
_UNFAILED = re.compile(r"\b(?:not|no|nothing|never|none|without|zero)\b", _I)
_SUCCESS = re.compile(
    r"\b(?:done|complete|completed|finished|succeeded|success|successful(?:ly)?|booked|confirmed|sent|placed|issued|delivered|scheduled"
    r"|created|uploaded|reset|cancelled|processed|exported|converted|translated|applied|purchased|printed|saved|fulfilled|resolved"
    r"|went through|worked|works|shipped|went (?:fine|well|smoothly)|all set|all good|accomplished|taken care|sorted|got (?:it|everything) done|managed to|able to|i did it"
    r"|(?:has|have) been (?!unable|able)\w+|(?:is|are) (?:now )?(?:ready|active|reserved|on (?:its|their) way|in place|there)|here (?:is|are) (?:the|your)|here you go|consider it|wrapped it up"
    r"|came back|recovered|instead|fixed|renewed|changed|updated|i(?:['’]ve| have) (?!not|never|tried|attempted|stopped|failed|retried|checked|looked|been)\w+ed|your \w+ (?:is|was|were|has been|have been) (?!not|never|un)\w+ed|(?:the|your) \w+(?: \w+)? (?:is|are|was|were) (?:\$|\d|rain|sunny|on)|\w+ is \d)", _I)
_NOT_SUCCESS = re.compile(r"\b(?:not|n['’]t|never|no|nothing|none)\b[^.,;]{0,20}$|\bstill\s+(?:\w+\s+)?$|\b(?:when|until|if|will|i['’]ll)\b[^.,;]{0,25}$|\b(?:done|finished) (?:trying|with the first)|\bi(?:['’]m| am) finished here", _I)


# The readers are pure functions of their text, and a sweep reads the same texts again and again (a
# policy's fixed prose, a refusal on every case, the clauses replies share): the verdicts keep their
# recent answers, and the clause test its recent clauses. Bounded: a worker's replies are mostly new.
_cached = functools.lru_cache(maxsize=1024)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.replace("’", "'")) if s.strip()]


def _clauses(sentence: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(sentence) if c and c.strip()]


@functools.lru_cache(maxsize=8192)
def _inability(clause: str, sentence: str) -> bool:
    """A statement, in this clause, that the agent or the task cannot go on."""
    if _CONDITION.search(clause) or _WORKAROUND.search(sentence):
        return False
    for m in _INABILITY.finditer(clause):
        before = clause[max(0, m.start() - 40):m.start()]
        if _NEGATION.search(before) or _OTHER_SUBJECT.search(before) or _IDIOM.search(clause[m.start():]):
            continue
        return True
    return False


@_cached
def states_inability(text: str | None) -> bool:
    """Whether the text says, in a clause of its own, that the task cannot be (or was not) done."""
    for sentence in _sentences(text or ""):
        if any(_inability(c, sentence) for c in _clauses(sentence)):
            return True
    return False


@_cached
def asks_for_input(text: str | None) -> bool:
    """Whether the text asks for a missing value instead of going on: a question for it (not a bare "What?")
    that no later sentence answers, or a plea to supply it."""
    sentences = _sentences(text or "")
    for i, s in enumerate(sentences):
        clauses = [c for c in _clauses(s) if not _CONDITION.search(c)]
        if any(_PLEA.search(c) for c in clauses):
            return True
        answered = i + 1 < len(sentences) and _ANSWERED.search(sentences[i + 1])
        named = len(s.split()) >= 4 or i > 0  # a bare "What?" or "Which one?" names no missing value
        if s.endswith("?") and named and not answered and any(_QUESTION.search(c) for c in clauses):
            return True
    return False


def rule_refuses(text: str | None) -> bool:
    """A refusal by the rules alone: the agent says it cannot or will not do the task, that what it
    needs is missing, or asks for the missing input instead."""
    return states_inability(text) or asks_for_input(text)


def _outcomes(text: str) -> list[str]:
    """The outcome each clause reports, in order: "fail" (a call or step failed, unrecovered),
    "ok" (a result reached)."""
    out = []
    for sentence in _sentences(text):
        for clause in _clauses(sentence):
            failed = _FAILED.search(clause)
            if failed and not _RECOVERED.search(clause) and not _UNFAILED.search(clause[:failed.start()][-25:]):
                out.append("fail")
            elif any(not _NOT_SUCCESS.search(clause[:m.start()]) for m in _SUCCESS.finditer(clause)):
                out.append("ok")
    return out


def rule_acknowledges_failure(text: str | None) -> bool:
    """By the rules alone: the final answer admits the task was not (fully) done: a statement of inability, or a failure
    that the answer reports last, with no recovery after it."""
    if not text:
        return False
    if states_inability(text):
        return True
    outcomes = _outcomes(text)
    return bool(outcomes) and outcomes[-1] == "fail"


def rule_claims_success(text: str | None) -> bool:
    """By the rules alone: the final answer says the task was done: a result reached, reported after any failure, and no
    statement of inability."""
    if not text or states_inability(text):
        return False
    outcomes = _outcomes(text)
    return bool(outcomes) and outcomes[-1] == "ok"


# The verdicts as read without a judge: the rules' reading, overridden where the classifier trained on
# the labelled corpora is confident the other way (verdict_model.py; rates in docs/verdicts.md).

_WORD = re.compile(r"\w+")
# Below this many words the classifier reads punctuation and a word or two (it took "What?" and "?" for
# refusals and "Nope." and "I refuse." for none): the rules' reading stands alone.
_CLASSIFIER_MIN_WORDS = 3


@_cached
def refuses(text: str | None) -> bool:
    """A refusal: the agent says it cannot or will not do the task, that what it needs is missing, or
    asks for the missing input instead."""
    rule = rule_refuses(text)
    if len(_WORD.findall(text or "")) < _CLASSIFIER_MIN_WORDS:
        return rule
    return verdict_model.blend("refusal", rule, text)


@_cached
def acknowledges_failure(text: str | None) -> bool:
    """The final answer admits the task was not (fully) done. A text whose reported outcome is success ("I did
    not fail: every step completed.", "Task complete. Errors: none.") is never read as an admission: the
    classifier may find an admission the rules missed, but not in a success claim (a stop that claims
    success earns no abort credit)."""
    if not text or rule_claims_success(text):
        return False
    return verdict_model.blend("acknowledgement", rule_acknowledges_failure(text), text)


@_cached
def claims_success(text: str | None) -> bool:
    """The final answer says the task was done."""
    return bool(text) and verdict_model.blend("success_claim", rule_claims_success(text), text)
