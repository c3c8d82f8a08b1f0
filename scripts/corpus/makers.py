"""Runs model makers for the corpus and the precision zoo: each `(name, make)` whose name contains the filter, a
failure reported and the rest made."""
import traceback


def make_each(makers, name_filter=""):
    """Calls each maker whose name contains `name_filter`; returns the names of those that failed."""
    failed = []
    for name, make in makers:
        if name_filter not in name:
            continue
        try:
            make()
            print("made", name, flush=True)
        except Exception as e:
            failed.append(name)
            print("FAILED to make", name, type(e).__name__, str(e).splitlines()[0][:200], flush=True)
            traceback.print_exc(limit=3)
    return failed
