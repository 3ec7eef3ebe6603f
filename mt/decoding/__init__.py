"""Sentences to translations: the protocol, the searches, the scheduler, the two backends, the line front end."""
