"""The app's screens: the ranked list, one test's detail, and the modals."""
