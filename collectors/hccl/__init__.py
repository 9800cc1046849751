"""HCCL and CANN log knowledge: line formats, the code and category table, the classifier, communicator
facts, culprit hints, the incident window, the log tailer and scanner, the rank table."""
