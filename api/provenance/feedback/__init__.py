"""Readers' "Was this right?": the responses kept so that they can be rated (`ResponseLog`), the verdicts
taken by POST /feedback (`FeedbackDesk`), and the eval cases made from them (`provenance feedback export`,
provenance.feedback.cases)."""
