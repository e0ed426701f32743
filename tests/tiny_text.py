"""A small synthetic English-like text for the tests that train tiny models on text: random
sentences of 5-15 words drawn from a fixed word list, about 60 kB, the same bytes on every
run (seeded)."""
import random

WORDS = ("the and of to in that he shall unto for his a lord they be is him not them it "
         "with all thou thy was god which my me said but ye their have will").split()


def write_tiny_text(directory, words=WORDS, seed=8, size=60000):
    """Write DIRECTORY/text.txt and return its path as a string."""
    rng = random.Random(seed)
    lines = []
    while sum(map(len, lines)) < size:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + ".\n")
    path = directory / "text.txt"
    path.write_text("".join(lines))
    return str(path)
