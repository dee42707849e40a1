"""The small, safe expression language that rules, live checks and the flight recorder's triggers share.

``expr`` parses and evaluates (three-valued: a missing fact is unknown);
``types`` checks an expression against the kinds of the names it reads, at
load, so a rule or trigger that compares a name with a number fails before it
runs. It sits below the judge and the collectors, which both use it.
"""
