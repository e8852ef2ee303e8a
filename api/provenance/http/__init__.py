"""The HTTP surface: routes (routes.py), what wraps every request (middleware.py), how errors leave
(exceptions.py, in the words of messages.py); provenance/app.py builds the app from them."""
