"""Dialogs and second screens: confirm, budget and help (`modals`), the run list (`run_list`)."""
