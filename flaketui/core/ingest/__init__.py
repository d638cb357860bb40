"""Getting data in: streaming JUnit XML parsing and pytest node id recovery."""
